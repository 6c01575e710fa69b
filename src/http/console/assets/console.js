// Spool's console: plain JavaScript against the service's own API, served from its own origin.
// Every value shown is set as text (never parsed as HTML): custom_ids, metadata and answers come
// from users. It follows /v1/changes (or /mgmt/v1/changes with the API key) and fetches again
// whatever the view shows when its subjects change.

const KEY_ITEM = 'spool.apiKey';
const TERMINAL = new Set(['completed', 'failed', 'expired', 'cancelled']);
const CANCELLABLE = new Set(['validating', 'in_progress']);
const CANCELLING = 'Cancelling: lines in flight finish, the rest go to the error file.';

const main = document.getElementById('main');
const liveStatus = document.getElementById('live');
const keyInput = document.getElementById('api-key');

/** The API key lives in this tab's session only: closing the browser forgets it. */
const apiKey = () => sessionStorage.getItem(KEY_ITEM) ?? '';

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(path, options = {}) {
  const headers = { ...(options.headers ?? {}) };
  if (apiKey()) headers.authorization = `Bearer ${apiKey()}`;
  const response = await fetch(path, { ...options, headers });
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      const body = await response.json();
      message = body?.error?.message ?? message;
    } catch {}
    throw new ApiError(response.status, message);
  }
  return options.raw ? response : response.json();
}

/** Makes an element: attributes (on* are listeners) and children (strings become text). */
function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on')) element.addEventListener(name.slice(2), value);
    else if (name === 'value') element.value = value;
    else element.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) if (child !== undefined && child !== null && child !== false) element.append(child instanceof Node ? child : String(child));
  return element;
}

const when = (seconds) => (seconds ? new Date(seconds * 1000).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC') : '—');
const whenMs = (ms) => new Date(ms).toISOString().replace('T', ' ').replace(/Z$/, ' UTC');
const count = (n) => Number(n ?? 0).toLocaleString('en');
const usd = (n) => (n === undefined || n === null ? '—' : `$${Number(n).toFixed(n < 1 ? 6 : 2)}`);
const bytes = (n) => (n < 1024 ? `${n} B` : n < 1024 ** 2 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 ** 2).toFixed(1)} MiB`);

function statusBadge(status) {
  const kind = status === 'completed' ? 'ok' : status === 'failed' || status === 'expired' ? 'bad' : status === 'cancelled' || status === 'cancelling' ? 'warn' : 'run';
  return h('span', { class: `badge ${kind}` }, status);
}

/** Whether the batch, at the rate it has run so far, ends after its deadline. */
function deadlineRisk(batch, now = Date.now() / 1000) {
  if (!batch.expires_at) return { label: 'no deadline', kind: '' };
  if (TERMINAL.has(batch.status)) return batch.status === 'expired' ? { label: 'missed', kind: 'bad' } : { label: 'done', kind: '' };
  if (now >= batch.expires_at) return { label: 'missed', kind: 'bad' };
  if (batch.status === 'finalizing') return { label: 'on track', kind: 'ok' };
  if (batch.status === 'cancelling') return { label: 'cancelling', kind: '' };
  const counts = batch.request_counts ?? {};
  const done = (counts.completed ?? 0) + (counts.failed ?? 0);
  if (batch.status !== 'in_progress' || !batch.in_progress_at) return { label: 'not started', kind: '' };
  if (done === 0) return { label: 'no line done yet', kind: '' };
  const rate = done / Math.max(1, now - batch.in_progress_at);
  const estimate = now + ((counts.total ?? done) - done) / rate;
  return estimate > batch.expires_at ? { label: `at risk: ends about ${when(Math.round(estimate))}`, kind: 'warn' } : { label: 'on track', kind: 'ok' };
}

function progressOf(batch) {
  const counts = batch.request_counts ?? {};
  const done = (counts.completed ?? 0) + (counts.failed ?? 0);
  const total = counts.total ?? 0;
  return h('progress', { max: Math.max(total, 1), value: total ? done : 0, 'aria-label': `${batch.id}: ${done} of ${total} lines done` });
}

/** Replaces a section's content, keeping focus on the element of the same `data-focus` where it was. */
function replace(container, ...children) {
  const focused = container.contains(document.activeElement) ? document.activeElement.getAttribute('data-focus') : null;
  container.replaceChildren(...children.flat());
  if (focused) container.querySelector(`[data-focus="${CSS.escape(focused)}"]`)?.focus();
}

function needsKey(error) {
  if (!(error instanceof ApiError) || (error.status !== 401 && error.status !== 403)) return h('p', { class: 'error', role: 'alert' }, `Could not load: ${error.message}`);
  return h('p', { class: 'notice', role: 'alert' }, apiKey() ? 'The API key was refused. Enter another above.' : 'This part needs the API key: enter it above (it is kept for this browser session only).');
}

/** A table with a header row of `headings` over `rows`. */
function table(headings, rows, caption) {
  return h('table', {}, caption ? h('caption', { class: 'muted' }, caption) : null, h('thead', {}, h('tr', {}, headings.map((name) => h('th', { scope: 'col' }, name)))), h('tbody', {}, rows));
}

/** What `path` answers, or undefined once `container` says why it could not be read. */
async function load(container, path) {
  try {
    return await api(path);
  } catch (error) {
    replace(container, needsKey(error));
    return undefined;
  }
}

/** Downloads a file through the API (with the key where one is set) as the browser would a link; a refusal is said beside `button`. */
async function download(fileId, name, button) {
  let response;
  try {
    response = await api(`/v1/files/${encodeURIComponent(fileId)}/content`, { raw: true });
  } catch (error) {
    button.after(needsKey(error));
    return;
  }
  const url = URL.createObjectURL(await response.blob());
  const link = h('a', { href: url, download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

// ---- views: each has a title, `mount` (build once) and `refresh` (fetch again), and says which changed subjects concern it.

const views = {
  batches: {
    title: 'Batches',
    concerns: (subject) => subject.startsWith('batch:'),
    mount(root) {
      root.append(h('h1', {}, 'Batches'), h('div', { id: 'batches-body' }, h('p', { class: 'muted' }, 'Loading…')));
    },
    async refresh() {
      const body = document.getElementById('batches-body');
      const list = await load(body, '/v1/batches?limit=100');
      if (!list) return;
      if (list.data.length === 0) return replace(body, h('p', {}, 'No batches yet.'));
      const rows = list.data.map((batch) => {
        const counts = batch.request_counts ?? {};
        const risk = deadlineRisk(batch);
        return h(
          'tr',
          { 'data-batch': batch.id },
          h('td', {}, h('a', { href: `#/batches/${batch.id}`, class: 'mono', 'data-focus': `batch-${batch.id}` }, batch.id)),
          h('td', {}, statusBadge(batch.status)),
          h('td', {}, progressOf(batch)),
          h('td', { class: 'num' }, `${count((counts.completed ?? 0) + (counts.failed ?? 0))} / ${count(counts.total)}`),
          h('td', { class: 'num' }, count(counts.failed)),
          h('td', {}, batch.model ?? '—'),
          h('td', {}, batch.job_id ?? '—'),
          h('td', { class: 'num' }, count(batch.usage?.total_tokens)),
          h('td', { class: 'num' }, usd(batch.processing_cost)),
          h('td', {}, when(batch.created_at)),
          h('td', {}, when(batch.expires_at)),
          h('td', {}, h('span', { class: `badge ${risk.kind}` }, risk.label)),
        );
      });
      const head = ['Batch', 'Status', 'Progress', 'Lines done', 'Failed', 'Model', 'Job', 'Tokens', 'Cost', 'Created', 'Deadline', 'Deadline risk'];
      replace(
        body,
        table(head, rows, `${list.data.length} newest batches`),
      );
    },
  },

  batch: {
    title: 'Batch',
    concerns: (subject, id) => subject === `batch:${id}`,
    mount(root, id) {
      root.append(
        h('h1', {}, 'Batch ', h('span', { class: 'mono' }, id)),
        h('div', { id: 'batch-summary' }, h('p', { class: 'muted' }, 'Loading…')),
        h('div', { id: 'batch-actions', class: 'actions' }),
        h('h2', {}, 'Files'),
        h('div', { id: 'batch-files' }),
        h('h2', {}, 'Timeline'),
        h('div', { id: 'batch-timeline' }),
        h('h2', {}, 'Lines'),
        lineBrowser(id),
      );
    },
    async refresh(id) {
      let batch;
      try {
        batch = await api(`/v1/batches/${encodeURIComponent(id)}`);
      } catch (error) {
        return replace(document.getElementById('batch-summary'), needsKey(error));
      }
      const counts = batch.request_counts ?? {};
      const risk = deadlineRisk(batch);
      replace(
        document.getElementById('batch-summary'),
        h(
          'dl',
          { class: 'facts' },
          h('dt', {}, 'Status'), h('dd', { id: 'batch-status' }, statusBadge(batch.status)),
          h('dt', {}, 'Progress'), h('dd', {}, progressOf(batch), ` ${count((counts.completed ?? 0) + (counts.failed ?? 0))} of ${count(counts.total)} lines (${count(counts.completed)} completed, ${count(counts.failed)} failed)`),
          h('dt', {}, 'Model'), h('dd', {}, batch.model ?? '—'),
          h('dt', {}, 'Job'), h('dd', {}, batch.job_id ?? '—'),
          h('dt', {}, 'Endpoint'), h('dd', { class: 'mono' }, batch.endpoint),
          h('dt', {}, 'Tokens'), h('dd', {}, `${count(batch.usage?.total_tokens)} (${count(batch.usage?.prompt_tokens ?? batch.usage?.input_tokens)} in, ${count(batch.usage?.completion_tokens ?? batch.usage?.output_tokens)} out)`),
          h('dt', {}, 'Cost'), h('dd', {}, usd(batch.processing_cost)),
          h('dt', {}, 'Created'), h('dd', {}, when(batch.created_at)),
          h('dt', {}, 'Deadline'), h('dd', {}, when(batch.expires_at), ' ', h('span', { class: `badge ${risk.kind}` }, risk.label)),
          h('dt', {}, 'Metadata'), h('dd', { id: 'batch-metadata' }, Object.keys(batch.metadata ?? {}).length ? Object.entries(batch.metadata).map(([key, value]) => h('div', {}, h('span', { class: 'mono' }, key), ': ', value)) : '—'),
          ...(batch.errors?.data?.length ? [h('dt', {}, 'Errors'), h('dd', { id: 'batch-errors' }, errorGroups(batch.errors))] : []),
        ),
      );
      const actions = document.getElementById('batch-actions');
      if (CANCELLABLE.has(batch.status)) {
        // Built once: a refresh must not undo a question the user is answering.
        if (actions.childElementCount === 0) replace(actions, cancelControl(id));
      } else if (batch.status === 'cancelling') {
        if (!actions.querySelector('[data-cancelling]')) replace(actions, h('p', { role: 'status', 'data-cancelling': true }, CANCELLING));
      } else replace(actions);
      replace(
        document.getElementById('batch-files'),
        h(
          'ul',
          {},
          [['Input', batch.input_file_id], ['Output', batch.output_file_id], ['Errors', batch.error_file_id]].map(([label, fileId]) =>
            h('li', {}, `${label}: `, fileId ? [h('span', { class: 'mono' }, fileId), ' ', h('button', { type: 'button', 'data-focus': `download-${label}`, onclick: (event) => download(fileId, `${id}_${label.toLowerCase()}.jsonl`, event.currentTarget) }, `Download ${label.toLowerCase()} file`)] : h('span', { class: 'muted' }, 'none yet')),
          ),
        ),
      );
      try {
        const events = await api(`/v1/batches/${encodeURIComponent(id)}/events?lines=false&limit=1000`);
        replace(
          document.getElementById('batch-timeline'),
          h('ol', { class: 'timeline' }, events.data.map((event) => h('li', {}, h('time', { datetime: new Date(event.recorded_at).toISOString() }, whenMs(event.recorded_at)), ' ', h('strong', {}, event.type), ' ', h('span', { class: 'muted' }, eventSummary(event))))),
        );
      } catch (error) {
        replace(document.getElementById('batch-timeline'), needsKey(error));
      }
    },
  },

  files: {
    title: 'Files',
    concerns: (subject) => subject.startsWith('file:'),
    mount(root) {
      root.append(h('h1', {}, 'Files'), h('div', { id: 'files-body' }, h('p', { class: 'muted' }, 'Loading…')));
    },
    async refresh() {
      const body = document.getElementById('files-body');
      const list = await load(body, '/v1/files?limit=100');
      if (!list) return;
      if (list.data.length === 0) return replace(body, h('p', {}, 'No files yet.'));
      const rows = list.data.map((file) =>
        h(
          'tr',
          { 'data-file': file.id },
          h('td', { class: 'mono' }, file.id),
          h('td', {}, file.filename),
          h('td', {}, file.purpose),
          h('td', { class: 'num' }, bytes(file.bytes)),
          h('td', {}, when(file.created_at)),
          h('td', {}, when(file.expires_at)),
          h('td', {}, h('button', { type: 'button', 'data-focus': `download-${file.id}`, 'aria-label': `Download ${file.filename}`, onclick: (event) => download(file.id, file.filename, event.currentTarget) }, 'Download')),
        ),
      );
      replace(body, table(['File', 'Name', 'Purpose', 'Size', 'Created', 'Expires', 'Content'], rows));
    },
  },

  jobs: {
    title: 'Jobs',
    concerns: (subject) => subject.startsWith('job:'),
    mount(root) {
      root.append(h('h1', {}, 'Jobs'), h('div', { id: 'jobs-body' }, h('p', { class: 'muted' }, 'Loading…')));
    },
    async refresh() {
      const body = document.getElementById('jobs-body');
      const list = await load(body, '/mgmt/v1/jobs');
      if (!list) return;
      const rows = list.data.map((job) => h('tr', {}, h('td', { class: 'mono' }, job.job_id), h('td', {}, job.model), h('td', {}, job.use_case), h('td', {}, job.sla), h('td', { class: 'num' }, usd(job.price_1m_tokens)), h('td', {}, when(job.created_at))));
      replace(body, table(['Job', 'Model', 'Use case', 'SLA', 'Price per 1M tokens', 'Reserved'], rows));
    },
  },

  fleet: {
    title: 'Fleet',
    // The fleet's figures are gauges, not events: read from /metrics every second while shown.
    pollMs: 1000,
    concerns: () => false,
    mount(root) {
      root.append(
        h('h1', {}, 'Fleet'),
        h('p', { class: 'muted' }, 'The figures /metrics serves, read every second.'),
        h('h2', {}, 'Replicas'),
        h('div', { id: 'fleet-replicas' }, h('p', { class: 'muted' }, 'Loading…')),
        h('h2', {}, 'Requests by class'),
        h('div', { id: 'fleet-classes' }),
      );
    },
    async refresh() {
      let text;
      try {
        text = await (await api('/metrics', { raw: true })).text();
      } catch (error) {
        return replace(document.getElementById('fleet-replicas'), needsKey(error));
      }
      const samples = parseMetrics(text);
      const limits = samples.filter((sample) => sample.name === 'spool_engine_concurrency_limit');
      const gauges = new Map(samples.filter((sample) => sample.name === 'spool_engine_capacity_from_gauges').map((sample) => [`${sample.labels.model}/${sample.labels.replica}`, sample.value]));
      replace(
        document.getElementById('fleet-replicas'),
        limits.length === 0
          ? h('p', {}, 'No replica figures in this process (the API process of a scaled-out deployment schedules no batch lines; read a processor’s /metrics).')
          : table(['Model', 'Replica', 'Learned concurrency', 'Limited by'], limits.map((sample) => h('tr', {}, h('td', {}, sample.labels.model), h('td', { class: 'mono' }, sample.labels.replica), h('td', { class: 'num' }, count(sample.value)), h('td', {}, gauges.get(`${sample.labels.model}/${sample.labels.replica}`) === 1 ? "the engine's load gauges" : 'throughput')))),
      );
      const byKey = new Map();
      for (const sample of samples) {
        if (sample.name !== 'spool_scheduler_queue_depth' && sample.name !== 'spool_engine_requests_in_flight') continue;
        const key = `${sample.labels.model}\u0000${sample.labels.class}`;
        const row = byKey.get(key) ?? { model: sample.labels.model, class: sample.labels.class, queued: 0, inFlight: 0 };
        if (sample.name === 'spool_scheduler_queue_depth') row.queued = sample.value;
        else row.inFlight = sample.value;
        byKey.set(key, row);
      }
      replace(
        document.getElementById('fleet-classes'),
        table(['Model', 'Class', 'Queued', 'In flight'], [...byKey.values()].map((row) => h('tr', {}, h('td', {}, row.model), h('td', {}, row.class), h('td', { class: 'num' }, count(row.queued)), h('td', { class: 'num' }, count(row.inFlight))))),
      );
    },
  },

  weights: {
    title: 'Weight syncs',
    concerns: (subject) => subject.startsWith('weights:'),
    mount(root) {
      root.append(h('h1', {}, 'Weight syncs'), h('div', { id: 'weights-body' }, h('p', { class: 'muted' }, 'Loading…')));
    },
    async refresh() {
      const body = document.getElementById('weights-body');
      const status = await load(body, '/mgmt/v1/weights/status');
      if (!status) return;
      const sections = [];
      for (const [model, entry] of Object.entries(status.models)) {
        let history = [];
        try {
          history = (await api(`/mgmt/v1/weights/${encodeURIComponent(model)}/events?limit=1000`)).data;
        } catch (error) {
          if (!(error instanceof ApiError && error.status === 404)) throw error;
        }
        sections.push(
          h(
            'section',
            { 'aria-labelledby': `weights-${model}`, 'data-model': model },
            h('h2', { id: `weights-${model}` }, model),
            h(
              'dl',
              { class: 'facts' },
              h('dt', {}, 'State'), h('dd', {}, h('span', { class: `badge ${entry.state === 'failed' ? 'bad' : entry.state === 'ready' ? 'ok' : 'run'}` }, entry.state)),
              h('dt', {}, 'Serving'), h('dd', { class: 'mono' }, `${entry.serving?.checkpoint ?? '—'}`, entry.serving?.since ? ` since ${when(entry.serving.since)}` : ''),
              h('dt', {}, 'Staged'), h('dd', { class: 'mono' }, entry.staged?.checkpoint ?? '—'),
              h('dt', {}, 'Replicas'), h('dd', {}, (entry.replicas ?? []).map((replica) => h('div', { class: 'mono' }, `${replica.id}: ${replica.checkpoint ?? 'initial'}`))),
              ...(entry.sync?.last_error ? [h('dt', {}, 'Last error'), h('dd', {}, String(entry.sync.last_error))] : []),
            ),
            h('h3', {}, 'History'),
            history.length === 0
              ? h('p', { class: 'muted' }, 'No weight sync yet.')
              : h('ol', { class: 'timeline' }, history.map((event) => h('li', {}, h('time', { datetime: new Date(event.recorded_at).toISOString() }, whenMs(event.recorded_at)), ' ', h('strong', {}, event.type), ' ', h('span', { class: 'muted' }, eventSummary(event))))),
          ),
        );
      }
      replace(body, sections.length ? sections : h('p', {}, 'The fleet serves no model.'));
    },
  },
};

/** A batch's errors as one line per code and message with its count (a cancelled batch lists every line it did not send). */
function errorGroups(errors) {
  const groups = new Map();
  for (const error of errors.data) {
    const key = `${error.code}: ${error.message}`;
    groups.set(key, (groups.get(key) ?? 0) + 1);
  }
  const shown = [...groups].slice(0, 10).map(([text, n]) => h('div', {}, n > 1 ? `${count(n)} × ${text}` : text));
  if (groups.size > 10) shown.push(h('div', { class: 'muted' }, `and ${count(groups.size - 10)} other kinds`));
  if (errors.omitted) shown.push(h('div', { class: 'muted' }, `(${count(errors.omitted)} more not listed)`));
  return shown;
}

/** One line saying what an event recorded, from the fields readers look for. */
function eventSummary(event) {
  const data = event.data ?? {};
  const parts = [];
  for (const name of ['status', 'checkpoint', 'location', 'replica_id', 'step', 'attempt', 'reason', 'error', 'message', 'lines_total', 'lines_done', 'output_file_id', 'error_file_id']) {
    const value = data[name];
    if (value === undefined || value === null || typeof value === 'object') continue;
    parts.push(`${name}: ${value}`);
  }
  if (data.request_counts) parts.push(`lines: ${data.request_counts.completed ?? 0} completed, ${data.request_counts.failed ?? 0} failed of ${data.request_counts.total ?? 0}`);
  if (typeof data.error === 'object' && data.error?.message) parts.push(data.error.message);
  return parts.join(' · ');
}

/** The `name{labels} value` lines of a Prometheus text page. */
function parseMetrics(text) {
  const samples = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const labels = {};
    for (const label of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[label[1]] = label[2].replace(/\\(.)/g, '$1');
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

function cancelControl(id) {
  const box = h('div', { class: 'actions' });
  const ask = h('button', {
    type: 'button',
    class: 'danger',
    'data-focus': 'cancel',
    onclick: () => {
      const confirm = h('button', {
        type: 'button',
        class: 'danger',
        'data-focus': 'cancel-confirm',
        onclick: async () => {
          confirm.disabled = true;
          try {
            await api(`/v1/batches/${encodeURIComponent(id)}/cancel`, { method: 'POST' });
            replace(box, h('p', { role: 'status' }, CANCELLING));
          } catch (error) {
            replace(box, needsKey(error));
          }
        },
      }, 'Yes, cancel this batch');
      replace(box, h('span', {}, 'Cancel it? Lines not yet sent go to the error file.'), confirm, h('button', { type: 'button', onclick: () => replace(box, ask) }, 'No, keep it running'));
      confirm.focus();
    },
  }, 'Cancel batch');
  box.append(ask);
  return box;
}

/** Output and error lines of a batch, found by custom_id, read from the files as a stream. */
function lineBrowser(id) {
  const form = h('form', { class: 'actions', id: 'line-form' });
  const which = h('select', { id: 'line-file', name: 'file' }, h('option', { value: 'output_file_id' }, 'Output file'), h('option', { value: 'error_file_id' }, 'Error file'));
  const filter = h('input', { id: 'line-custom-id', name: 'custom_id', type: 'search', placeholder: 'all lines' });
  const results = h('div', { id: 'line-results', 'aria-live': 'polite' });
  form.append(h('label', { for: 'line-file' }, 'File'), which, h('label', { for: 'line-custom-id' }, 'custom_id contains'), filter, h('button', { type: 'submit' }, 'Show lines'));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    replace(results, h('p', { class: 'muted' }, 'Reading…'));
    try {
      const batch = await api(`/v1/batches/${encodeURIComponent(id)}`);
      const fileId = batch[which.value];
      if (!fileId) return replace(results, h('p', {}, `This batch has no ${which.value === 'output_file_id' ? 'output' : 'error'} file yet.`));
      const found = await readLines(fileId, filter.value, 50);
      if (found.lines.length === 0) return replace(results, h('p', {}, 'No line matches.'));
      replace(
        results,
        h('p', { class: 'muted' }, `${found.lines.length} line${found.lines.length === 1 ? '' : 's'} shown${found.more ? ' (more match: narrow the custom_id)' : ''}.`),
        table(['custom_id', 'Status', 'Answer'], found.lines.map((line) => h('tr', { 'data-custom-id': line.custom_id }, h('td', { class: 'mono' }, line.custom_id), h('td', {}, line.response?.status_code ?? line.error?.code ?? '—'), h('td', {}, h('details', {}, h('summary', {}, answerSummary(line)), h('pre', {}, JSON.stringify(line, null, 2))))))),
      );
    } catch (error) {
      replace(results, needsKey(error));
    }
  });
  return h('div', {}, form, results);
}

function answerSummary(line) {
  const body = line.response?.body;
  const text = body?.choices?.[0]?.message?.content ?? body?.choices?.[0]?.text ?? (body?.data ? `${body.data.length} embedding(s)` : undefined) ?? line.error?.message ?? line.response?.body?.error?.message;
  const shown = typeof text === 'string' ? text : JSON.stringify(body ?? line.error ?? {});
  return shown.length > 160 ? `${shown.slice(0, 160)}…` : shown;
}

/** Reads a JSONL file's lines as they arrive, keeping those whose custom_id contains `needle`, and stops after `limit`. */
async function readLines(fileId, needle, limit) {
  const response = await api(`/v1/files/${encodeURIComponent(fileId)}/content`, { raw: true });
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  const lines = [];
  let rest = '';
  for (;;) {
    const { value, done } = await reader.read();
    const text = rest + (value ?? '');
    const parts = text.split('\n');
    rest = done ? '' : parts.pop();
    for (const part of parts) {
      if (!part.trim()) continue;
      const line = JSON.parse(part);
      if (needle && !String(line.custom_id).includes(needle)) continue;
      if (lines.length === limit) {
        await reader.cancel();
        return { lines, more: true };
      }
      lines.push(line);
    }
    if (done) return { lines, more: false };
  }
}

// ---- routing and the live feed

let current = { view: undefined, id: undefined };
let refreshing = false;
let refreshAgain = false;
let pollTimer;

async function refresh() {
  if (refreshing) {
    refreshAgain = true;
    return;
  }
  refreshing = true;
  try {
    do {
      refreshAgain = false;
      await current.view?.refresh(current.id).catch((error) => console.error(error));
    } while (refreshAgain);
  } finally {
    refreshing = false;
  }
}

function route() {
  const [, section = 'batches', id] = location.hash.replace(/^#\/?/, '#/').split('/');
  const view = section === 'batches' && id ? views.batch : views[section] ?? views.batches;
  current = { view, id: id ? decodeURIComponent(id) : undefined };
  document.title = `${view.title}${current.id ? ` ${current.id}` : ''} · Spool console`;
  for (const link of document.querySelectorAll('nav a')) {
    if (link.getAttribute('href') === `#/${section}`) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  main.replaceChildren();
  view.mount(main, current.id);
  clearInterval(pollTimer);
  if (view.pollMs) pollTimer = setInterval(refresh, view.pollMs);
  void refresh();
}

let feed;

/**
 * Follows the change stream (fetch, so that the key can go in a header), reconnecting after a
 * second. With a key, the management stream (everything); an account's key, which that stream
 * refuses, follows the account's own batches and files instead.
 */
async function follow() {
  feed?.abort();
  const controller = new AbortController();
  feed = controller;
  let management = Boolean(apiKey());
  while (!controller.signal.aborted) {
    try {
      const response = await api(management ? '/mgmt/v1/changes' : '/v1/changes', { raw: true, signal: controller.signal, headers: { accept: 'text/event-stream' } });
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const message = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const type = /^event: (.*)$/m.exec(message)?.[1];
          const data = /^data: (.*)$/m.exec(message)?.[1];
          if (type === 'ready') {
            liveStatus.textContent = 'Live';
            void refresh();
          } else if (type === 'changed' && data) {
            const { subjects } = JSON.parse(data);
            if (subjects.some((subject) => current.view?.concerns(subject, current.id))) void refresh();
          }
        }
      }
    } catch (error) {
      if (controller.signal.aborted) return;
      // A key the management stream refuses (an account's): follow what /v1 shows it at once.
      if (error instanceof ApiError && error.status === 401 && management) {
        management = false;
        continue;
      }
      if (error instanceof ApiError && error.status === 401) {
        liveStatus.textContent = 'Live updates need the API key';
        await new Promise((resolve) => setTimeout(resolve, 1000));
        continue;
      }
    }
    if (controller.signal.aborted) return;
    liveStatus.textContent = 'Reconnecting…';
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

document.getElementById('key-form').addEventListener('submit', (event) => {
  event.preventDefault();
  if (keyInput.value) sessionStorage.setItem(KEY_ITEM, keyInput.value);
  keyInput.value = '';
  keyInput.placeholder = apiKey() ? 'key set for this session' : '';
  void follow();
  void refresh();
});
document.getElementById('forget-key').addEventListener('click', () => {
  sessionStorage.removeItem(KEY_ITEM);
  keyInput.placeholder = '';
  void follow();
  void refresh();
});
keyInput.placeholder = apiKey() ? 'key set for this session' : '';
window.addEventListener('hashchange', () => {
  route();
  main.focus();
});
route();
void follow();
