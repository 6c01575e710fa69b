/**
 * The page at /docs: the service description rendered in the browser from /openapi.json by an
 * inline script, with no asset fetched from anywhere else (the page works offline and under a
 * strict content security policy of its own).
 */
export const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Spool API</title>
<style>
  body { font: 15px/1.5 system-ui, sans-serif; margin: 0; color: #1d2330; background: #f7f8fa; }
  header { background: #1d2330; color: #fff; padding: 1.2em 2em; }
  header h1 { margin: 0; font-size: 1.5em; }
  main { max-width: 70em; margin: 0 auto; padding: 1em 2em 4em; }
  h2 { margin-top: 2em; border-bottom: 1px solid #d5d9e0; text-transform: capitalize; }
  details.op { background: #fff; border: 1px solid #d5d9e0; border-radius: 6px; margin: .5em 0; }
  details.op > summary { cursor: pointer; padding: .6em .9em; list-style: none; }
  details.op[open] > summary { border-bottom: 1px solid #e4e7ec; }
  .method { display: inline-block; min-width: 4.5em; font-weight: 600; font-family: ui-monospace, monospace; }
  .get { color: #1b6ac9; } .post { color: #18864b; } .delete { color: #c0392b; } .put, .patch { color: #a66a00; }
  .path { font-family: ui-monospace, monospace; }
  .summary { color: #5b6474; margin-left: 1em; }
  .body { padding: .3em 1em 1em; }
  table { border-collapse: collapse; width: 100%; }
  td, th { text-align: left; padding: .25em .6em; border-bottom: 1px solid #eef0f3; vertical-align: top; }
  code, pre { font-family: ui-monospace, monospace; font-size: 13px; }
  pre { background: #f1f3f6; padding: .6em; border-radius: 4px; overflow: auto; max-height: 28em; }
  .lock { font-size: .85em; color: #a66a00; margin-left: .6em; }
</style>
</head>
<body>
<header><h1 id="title">Spool API</h1><div id="subtitle"></div></header>
<main id="content"><p>Loading the service description…</p></main>
<script>
(function () {
  var content = document.getElementById('content');
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    (children || []).forEach(function (child) { node.appendChild(typeof child === 'string' ? document.createTextNode(child) : child); });
    return node;
  }
  function schemaBlock(schema) { return el('pre', {}, [JSON.stringify(schema, null, 2)]); }
  function operation(method, path, op) {
    var body = el('div', { class: 'body' });
    if (op.description) body.appendChild(el('p', {}, [op.description]));
    body.appendChild(el('p', {}, [el('code', {}, ['operationId: ' + op.operationId])]));
    if (op.parameters && op.parameters.length) {
      var rows = op.parameters.map(function (p) {
        return el('tr', {}, [el('td', {}, [el('code', {}, [p.name])]), el('td', {}, [p.in + (p.required ? ', required' : '')]), el('td', {}, [p.description || '']), el('td', {}, [el('code', {}, [JSON.stringify(p.schema)])])]);
      });
      body.appendChild(el('h4', {}, ['Parameters']));
      body.appendChild(el('table', {}, [el('tr', {}, [el('th', {}, ['Name']), el('th', {}, ['In']), el('th', {}, ['Description']), el('th', {}, ['Schema'])])].concat(rows)));
    }
    if (op.requestBody) {
      body.appendChild(el('h4', {}, ['Request body']));
      Object.keys(op.requestBody.content).forEach(function (type) {
        body.appendChild(el('div', {}, [el('code', {}, [type])]));
        body.appendChild(schemaBlock(op.requestBody.content[type].schema));
      });
    }
    body.appendChild(el('h4', {}, ['Responses']));
    Object.keys(op.responses).forEach(function (status) {
      var response = op.responses[status];
      var item = el('details', {}, [el('summary', {}, [el('strong', {}, [status]), ' ' + response.description])]);
      Object.keys(response.content || {}).forEach(function (type) {
        item.appendChild(el('div', {}, [el('code', {}, [type])]));
        item.appendChild(schemaBlock(response.content[type].schema));
      });
      body.appendChild(item);
    });
    var summary = el('summary', {}, [el('span', { class: 'method ' + method }, [method.toUpperCase()]), el('span', { class: 'path' }, [path]), el('span', { class: 'summary' }, [op.summary || ''])]);
    if (op.security && op.security.length) summary.appendChild(el('span', { class: 'lock' }, ['bearer']));
    return el('details', { class: 'op', id: op.operationId }, [summary, body]);
  }
  fetch('openapi.json').then(function (answer) { return answer.json(); }).then(function (doc) {
    document.getElementById('title').textContent = doc.info.title + ' ' + doc.info.version;
    document.getElementById('subtitle').textContent = doc.info.description + ' (OpenAPI ' + doc.openapi + ')';
    content.textContent = '';
    var byTag = {};
    Object.keys(doc.paths).forEach(function (path) {
      Object.keys(doc.paths[path]).forEach(function (method) {
        var op = doc.paths[path][method];
        var tag = (op.tags && op.tags[0]) || 'other';
        (byTag[tag] = byTag[tag] || []).push(operation(method, path, op));
      });
    });
    (doc.tags || []).map(function (t) { return t.name; }).concat(Object.keys(byTag)).filter(function (tag, index, all) { return byTag[tag] && all.indexOf(tag) === index; }).forEach(function (tag) {
      var described = (doc.tags || []).filter(function (t) { return t.name === tag; })[0];
      content.appendChild(el('h2', { id: 'tag-' + tag }, [tag]));
      if (described && described.description) content.appendChild(el('p', {}, [described.description]));
      byTag[tag].forEach(function (node) { content.appendChild(node); });
    });
  }).catch(function (error) { content.textContent = 'Could not load openapi.json: ' + error; });
})();
</script>
</body>
</html>
`;
