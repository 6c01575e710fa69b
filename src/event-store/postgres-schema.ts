// The PostgreSQL event store's schema, in versions. Spool applies the missing ones at start, in one
// transaction under an advisory lock (several processes may start at once), and records each in
// `spool_schema`; a database migrated by a newer Spool is refused rather than misread. A version,
// once released, is never edited: a change is a new entry at the end.

/** The advisory lock key migrations hold ('Spool' in ASCII, then 1). */
export const SCHEMA_LOCK_KEY = 0x53706f6f6c_01;
/**
 * The advisory lock every appending transaction holds to its commit ('Spool', then 2): see
 * PostgresEventStore for why the log's order needs it. Transaction-scoped, so a connection that
 * dies releases it. Written into version 2's function: never changed.
 */
export const APPEND_LOCK_KEY = 0x53706f6f6c_02;

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
  // 2: one round trip a group commit. The group's appends as JSON ([{stream, expected, events:
  // [{id, type, data, metadata}]}], expected being 'any', 'no_stream', 'stream_exists' or a
  // revision as text), checked and written in one statement (so in one transaction, committed as
  // the statement ends) under the append lock; each append's outcome in order: {revision,
  // position} written, {found: [...]} for events already held (the caller tells a retry from a
  // conflict), or {wrong: last revision or 'no_stream'}. Bigints travel as text.
  `CREATE FUNCTION spool_append_group(appends json, recorded_at bigint) RETURNS json
   LANGUAGE plpgsql AS $$
   DECLARE
     next_position bigint;
     item json;
     ids text[];
     held json;
     last_revision bigint;
     expected text;
     first_revision bigint;
     n integer;
     outcomes json[] := '{}';
     wrote boolean := false;
   BEGIN
     PERFORM pg_advisory_xact_lock(${APPEND_LOCK_KEY});
     SELECT coalesce(max(position), 0) + 1 INTO next_position FROM spool_events;
     FOR item IN SELECT value FROM json_array_elements(appends) LOOP
       SELECT array_agg(e->>'id') INTO ids FROM json_array_elements(item->'events') AS e;
       n := coalesce(array_length(ids, 1), 0);
       SELECT json_agg(json_build_object('event_id', event_id, 'stream_name', stream_name, 'revision', revision::text, 'position', position::text))
         INTO held FROM spool_events WHERE event_id = ANY(ids);
       IF held IS NOT NULL THEN
         outcomes := outcomes || json_build_object('found', held);
         CONTINUE;
       END IF;
       SELECT max(revision) INTO last_revision FROM spool_events WHERE stream_name = item->>'stream';
       expected := item->>'expected';
       IF NOT (expected = 'any'
               OR (expected = 'no_stream' AND last_revision IS NULL)
               OR (expected = 'stream_exists' AND last_revision IS NOT NULL)
               OR (last_revision IS NOT NULL AND expected = last_revision::text)) THEN
         outcomes := outcomes || json_build_object('wrong', coalesce(last_revision::text, 'no_stream'));
         CONTINUE;
       END IF;
       first_revision := coalesce(last_revision + 1, 0);
       INSERT INTO spool_events (position, event_id, stream_name, revision, type, data, metadata, recorded_at)
         SELECT next_position + i - 1, e->>'id', item->>'stream', first_revision + i - 1, e->>'type', e->'data', e->'metadata', recorded_at
         FROM json_array_elements(item->'events') WITH ORDINALITY AS x(e, i);
       outcomes := outcomes || json_build_object('revision', (first_revision + n - 1)::text, 'position', (next_position + n - 1)::text);
       next_position := next_position + n;
       wrote := true;
     END LOOP;
     IF wrote THEN
       PERFORM pg_notify('spool_events', '');
     END IF;
     RETURN array_to_json(outcomes);
   END
   $$`,
];
