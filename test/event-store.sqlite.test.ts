import { join } from 'node:path';
import { SqliteEventStore } from '../src/event-store/sqlite-event-store.js';
import { eventStoreContract } from './support/event-store-contract.js';
import { tempDir } from './support/service.js';

eventStoreContract('embedded SQLite', async () => new SqliteEventStore(join(tempDir('events'), 'events.sqlite')));
