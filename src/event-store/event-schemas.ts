import { type SchemaValidator, compiledSchemaFile, describeMismatch, schemaNames, schemaProblems } from '../platform/schemas.js';
import type { AppendResult, EventStore, ExpectedRevision, NewEvent } from './event-store.js';

export class EventSchemaError extends Error {
  override readonly name = 'EventSchemaError';
  constructor(readonly eventType: string, readonly schemaVersion: number, readonly problems: readonly string[]) {
    super(describeMismatch(`event ${eventType} v${schemaVersion} does not match its schema`, problems));
  }
}

/**
 * The JSON Schemas of every event type, one file per type and version:
 * schemas/events/<Type>.v<version>.json.
 */
export class EventSchemas {
  private readonly validators = new Map<string, SchemaValidator>();

  constructor() {
    for (const name of schemaNames('events')) {
      if (/^[A-Za-z]+\.v\d+$/.test(name)) this.validators.set(name, compiledSchemaFile('events', name));
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
      throw new EventSchemaError(event.type, version, schemaProblems(validate.errors));
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
