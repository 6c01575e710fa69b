// The PostgreSQL event store's schema, in versions. Spool applies the missing ones at start, in one
// transaction under an advisory lock (several processes may start at once), and records each in
// `spool_schema`; a database migrated by a newer Spool is refused rather than misread. A version,
// once released, is never edited: a change is a new entry at the end.

/** The advisory lock key migrations hold ('Spool' in ASCII, then 1). */
export const SCHEMA_LOCK_KEY = 0x53706f6f6c_01;

export const POSTGRES_MIGRATIONS: readonly string[] = [
  // 1: the log. `position` is the global order (handed out in commit order: see
  // PostgresEventStore); a stream's revisions and the event ids are unique, the second making an
  // append idempotent. Data and metadata are JSON as the writer sent it (json, not jsonb: kept byte
  // for byte, key order included), queryable with PostgreSQL's JSON operators for audits.
  `CREATE TABLE spool_events (
     position    BIGINT  PRIMARY KEY,
     event_id    TEXT    NOT NULL UNIQUE,
     stream_name TEXT    NOT NULL,
     revision    BIGINT  NOT NULL,
     type        TEXT    NOT NULL,
     data        JSON    NOT NULL,
     metadata    JSON    NOT NULL,
     recorded_at BIGINT  NOT NULL,
     UNIQUE (stream_name, revision)
   )`,
];
