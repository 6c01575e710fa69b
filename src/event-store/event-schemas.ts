import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import { schemasDir } from '../platform/package-root.js';
import type { AppendResult, EventStore, ExpectedRevision, NewEvent } from './event-store.js';

export class EventSchemaError extends Error {
  override readonly name = 'EventSchemaError';
  constructor(readonly eventType: string, readonly schemaVersion: number, readonly problems: readonly string[]) {
    super(`event ${eventType} v${schemaVersion} does not match its schema: ${problems.join('; ')}`);
  }
}

/**
 * The JSON Schemas of every event type, one file per type and version:
 * schemas/events/<Type>.v<version>.json.
 */
export class EventSchemas {
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(directory = join(schemasDir, 'events')) {
    const ajv = new Ajv({ allErrors: true, strict: true });
    for (const name of readdirSync(directory).sort()) {
      const match = /^([A-Za-z]+)\.v(\d+)\.json$/.exec(name);
      if (!match) continue;
      const schema = JSON.parse(readFileSync(join(directory, name), 'utf8')) as object;
      this.validators.set(`${match[1]}.v${match[2]}`, ajv.compile(schema));
    }
  }

  get eventTypes(): string[] {
    return [...this.validators.keys()];
  }

  check(event: NewEvent): void {
    const version = event.metadata.schemaVersion;
    const validate = this.validators.get(`${event.type}.v${version}`);
    if (!validate) throw new EventSchemaError(event.type, version, ['no schema for this event type and version']);
    if (!validate(event.data)) {
      throw new EventSchemaError(
        event.type,
        version,
        (validate.errors ?? []).map((error) => `${error.instancePath || '/'} ${error.message ?? 'is invalid'}`),
      );
    }
  }
}

/** Every append goes through here: an event that does not match its schema is never written. */
export class SchemaCheckedEventStore implements EventStore {
  constructor(private readonly inner: EventStore, private readonly schemas: EventSchemas) {}

  get kind(): EventStore['kind'] {
    return this.inner.kind;
  }

  async appendToStream(streamName: string, events: readonly NewEvent[], options?: { expectedRevision?: ExpectedRevision }): Promise<AppendResult> {
    for (const event of events) this.schemas.check(event);
    return this.inner.appendToStream(streamName, events, options);
  }

  readStream: EventStore['readStream'] = (streamName, options) => this.inner.readStream(streamName, options);
  readAll: EventStore['readAll'] = (options) => this.inner.readAll(options);
  headPosition: EventStore['headPosition'] = () => this.inner.headPosition();
  subscribeToAll: EventStore['subscribeToAll'] = (options, handler) => this.inner.subscribeToAll(options, handler);
  close: EventStore['close'] = () => this.inner.close();
}

/** Reports how long each append takes (for the metrics), whatever its end. */
export class AppendTimedEventStore implements EventStore {
  constructor(private readonly inner: EventStore, private readonly observe: (seconds: number) => void) {}

  get kind(): EventStore['kind'] {
    return this.inner.kind;
  }

  async appendToStream(streamName: string, events: readonly NewEvent[], options?: { expectedRevision?: ExpectedRevision }): Promise<AppendResult> {
    const startedAt = performance.now();
    try {
      return await this.inner.appendToStream(streamName, events, options);
    } finally {
      this.observe((performance.now() - startedAt) / 1000);
    }
  }

  readStream: EventStore['readStream'] = (streamName, options) => this.inner.readStream(streamName, options);
  readAll: EventStore['readAll'] = (options) => this.inner.readAll(options);
  headPosition: EventStore['headPosition'] = () => this.inner.headPosition();
  subscribeToAll: EventStore['subscribeToAll'] = (options, handler) => this.inner.subscribeToAll(options, handler);
  close: EventStore['close'] = () => this.inner.close();
}
