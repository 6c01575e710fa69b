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

/** Versions 1 to 4, as released; version 5 is made from version 4's text (below). */
const RELEASED_TO_4: readonly string[] = [
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
  // 3: version 2's function with the same outcomes, at about 40% less of the server's time an
  // append (about 330 → 200 µs; bench §14 has the figures). An append of one event (the common case) looks its id up with `=`, not
  // `= ANY(array)`: PostgreSQL plans an array comparison anew on every call (its generic plan is
  // costed above the custom one), about 90 µs each time; one statement asks both whether the events
  // are held and the stream's last revision; the held events are listed only when there are some.
  // The plans stay PostgreSQL's own choice (a forced generic plan, made while the table was still
  // small, scanned it whole for as long as the connection lived).
  `CREATE OR REPLACE FUNCTION spool_append_group(appends json, recorded_at bigint) RETURNS json
   LANGUAGE plpgsql AS $$
   DECLARE
     next_position bigint;
     item json;
     events json;
     stream text;
     ids text[];
     held boolean;
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
       events := item->'events';
       stream := item->>'stream';
       n := json_array_length(events);
       IF n = 1 THEN
         ids := ARRAY[events->0->>'id'];
         SELECT EXISTS (SELECT 1 FROM spool_events WHERE event_id = ids[1]), (SELECT max(revision) FROM spool_events WHERE stream_name = stream)
           INTO held, last_revision;
       ELSE
         ids := ARRAY(SELECT e->>'id' FROM json_array_elements(events) AS e);
         SELECT EXISTS (SELECT 1 FROM spool_events WHERE event_id = ANY(ids)), (SELECT max(revision) FROM spool_events WHERE stream_name = stream)
           INTO held, last_revision;
       END IF;
       IF held THEN
         outcomes := outcomes || (SELECT json_build_object('found', json_agg(json_build_object('event_id', event_id, 'stream_name', stream_name, 'revision', revision::text, 'position', position::text)))
                                    FROM spool_events WHERE event_id = ANY(ids));
         CONTINUE;
       END IF;
       expected := item->>'expected';
       IF NOT (expected = 'any'
               OR (expected = 'no_stream' AND last_revision IS NULL)
               OR (expected = 'stream_exists' AND last_revision IS NOT NULL)
               OR (last_revision IS NOT NULL AND expected = last_revision::text)) THEN
         outcomes := outcomes || json_build_object('wrong', coalesce(last_revision::text, 'no_stream'));
         CONTINUE;
       END IF;
       first_revision := coalesce(last_revision + 1, 0);
       IF n = 1 THEN
         INSERT INTO spool_events (position, event_id, stream_name, revision, type, data, metadata, recorded_at)
           VALUES (next_position, ids[1], stream, first_revision, events->0->>'type', events->0->'data', events->0->'metadata', recorded_at);
       ELSE
         INSERT INTO spool_events (position, event_id, stream_name, revision, type, data, metadata, recorded_at)
           SELECT next_position + i - 1, e->>'id', stream, first_revision + i - 1, e->>'type', e->'data', e->'metadata', recorded_at
           FROM json_array_elements(events) WITH ORDINALITY AS x(e, i);
       END IF;
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
  // 4: version 3's function with the same outcomes, mended twice.
  // - It stays on the indexes. PostgreSQL plans a function's statements once per connection and may
  //   keep that plan; one made while the log was nearly empty read the whole table for the id check
  //   of every append of several events, as long as the connection lived (a group of 63 events took
  //   8.6 ms at first and 111 ms once the log held 85,000). An id check of several ids runs with
  //   sequential scans off (for the rest of the group commit's transaction: every statement here has an
  //   index to go by). Not the whole function: a SET clause on it costs about 20 µs a call, about 6% of
  //   a one-event append, whose `=` lookup was never seen off its index.
  // - It reads the group's JSON once. A json value (text, so that an event's data is stored byte for
  //   byte) is parsed again by every `->` taken of it: version 3 went over an event's data about
  //   eight times. Here the group is parsed once into its appends and each append's events once
  //   into arrays (json_to_recordset keeps a json field's text as written, key order and spacing
  //   included): 2.95 → 1.80 ms a group of three appends of 21 line outcomes; one-event appends unchanged.
  `CREATE OR REPLACE FUNCTION spool_append_group(appends json, recorded_at bigint) RETURNS json
   LANGUAGE plpgsql AS $$
   DECLARE
     next_position bigint;
     item record;
     ids text[];
     types text[];
     datas json[];
     metas json[];
     held boolean;
     last_revision bigint;
     first_revision bigint;
     n integer;
     outcomes json[] := '{}';
     wrote boolean := false;
   BEGIN
     PERFORM pg_advisory_xact_lock(${APPEND_LOCK_KEY});
     SELECT coalesce(max(position), 0) + 1 INTO next_position FROM spool_events;
     FOR item IN SELECT a.stream, a.expected, a.events
                 FROM ROWS FROM (json_to_recordset(appends) AS (stream text, expected text, events json)) WITH ORDINALITY AS a(stream, expected, events, k)
                 ORDER BY a.k LOOP
       n := json_array_length(item.events);
       IF n = 1 THEN
         SELECT ARRAY[x.id], ARRAY[x.type], ARRAY[x.data], ARRAY[x.metadata] INTO ids, types, datas, metas
           FROM json_to_record(item.events->0) AS x(id text, type text, data json, metadata json);
         SELECT EXISTS (SELECT 1 FROM spool_events WHERE event_id = ids[1]), (SELECT max(revision) FROM spool_events WHERE stream_name = item.stream)
           INTO held, last_revision;
       ELSE
         SELECT array_agg(x.id ORDER BY x.k), array_agg(x.type ORDER BY x.k), array_agg(x.data ORDER BY x.k), array_agg(x.metadata ORDER BY x.k)
           INTO ids, types, datas, metas
           FROM ROWS FROM (json_to_recordset(item.events) AS (id text, type text, data json, metadata json)) WITH ORDINALITY AS x(id, type, data, metadata, k);
         PERFORM set_config('enable_seqscan', 'off', true);
         SELECT EXISTS (SELECT 1 FROM spool_events WHERE event_id = ANY(ids)), (SELECT max(revision) FROM spool_events WHERE stream_name = item.stream)
           INTO held, last_revision;
       END IF;
       IF held THEN
         PERFORM set_config('enable_seqscan', 'off', true);
         outcomes := outcomes || (SELECT json_build_object('found', json_agg(json_build_object('event_id', event_id, 'stream_name', stream_name, 'revision', revision::text, 'position', position::text)))
                                    FROM spool_events WHERE event_id = ANY(ids));
         CONTINUE;
       END IF;
       IF NOT (item.expected = 'any'
               OR (item.expected = 'no_stream' AND last_revision IS NULL)
               OR (item.expected = 'stream_exists' AND last_revision IS NOT NULL)
               OR (last_revision IS NOT NULL AND item.expected = last_revision::text)) THEN
         outcomes := outcomes || json_build_object('wrong', coalesce(last_revision::text, 'no_stream'));
         CONTINUE;
       END IF;
       first_revision := coalesce(last_revision + 1, 0);
       IF n = 1 THEN
         INSERT INTO spool_events (position, event_id, stream_name, revision, type, data, metadata, recorded_at)
           VALUES (next_position, ids[1], item.stream, first_revision, types[1], datas[1], metas[1], recorded_at);
       ELSE
         INSERT INTO spool_events (position, event_id, stream_name, revision, type, data, metadata, recorded_at)
           SELECT next_position + u.k - 1, u.id, item.stream, first_revision + u.k - 1, u.type, u.data, u.metadata, recorded_at
           FROM unnest(ids, types, datas, metas) WITH ORDINALITY AS u(id, type, data, metadata, k);
       END IF;
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

export const POSTGRES_MIGRATIONS: readonly string[] = [
  ...RELEASED_TO_4,
  // 5: version 4's function with the same outcomes, its notification naming the newest position
  // the commit wrote. A subscription that has read that far (in the appending process, which heard
  // of its commit as the append returned) reads nothing for it, where it used to read an empty
  // page. Made from version 4's text rather than written out again: one line differs.
  withNotifiedPosition(RELEASED_TO_4[3]!),
];

/** Version 4's function as version 5: its notification's payload is the newest position written (next_position - 1 as it ends). */
function withNotifiedPosition(version4: string): string {
  const silent = "PERFORM pg_notify('spool_events', '');";
  if (version4.split(silent).length !== 2) throw new Error('schema version 4 no longer holds the one notification version 5 changes');
  return version4.replace(silent, "PERFORM pg_notify('spool_events', (next_position - 1)::text);");
}
