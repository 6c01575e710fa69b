// One appending process of test/event-store.postgres.test.ts: appends COUNT events over a few
// streams of its own, CONCURRENCY appends in flight at once, through the built adapter; prints
// "done" and exits.   node postgres-appender.mjs URL LABEL COUNT CONCURRENCY
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [url, label, countText, concurrencyText] = process.argv.slice(2);
const root = join(import.meta.dirname, '..', '..');
const { PostgresEventStore } = await import(pathToFileURL(join(root, 'dist/src/event-store/postgres-event-store.js')).href);
const store = new PostgresEventStore(url);
const count = Number(countText);
let next = 0;
async function worker() {
  while (next < count) {
    const index = next++;
    // Two events in some appends: positions of one append must stay together and in order.
    const events = Array.from({ length: index % 5 === 0 ? 2 : 1 }, (_, part) => ({
      id: randomUUID(),
      type: 'Appended',
      data: { label, index, part },
      metadata: { schemaVersion: 1 },
    }));
    await store.appendToStream(`order_${label}_${index % 7}`, events);
  }
}
await Promise.all(Array.from({ length: Number(concurrencyText) }, worker));
await store.close();
process.stdout.write('done\n');
