import { sql, type Kysely, type Migration, type RawBuilder } from 'kysely';
import type { Dialect } from './schema.js';
import { baselineRowBytesSql, deliveryAnswerBytesSql, EVENT_APPEND_LOCK, LOG_ROW_OVERHEAD, STORED_DELIVERY_BYTES_SQL, STORED_ROW_BYTES_SQL } from './schema.js';

/**
 * Versioned migrations, run at start-up by Kysely's Migrator. Append new ones; never edit a released one.
 * The few differences between SQLite and PostgreSQL (auto-increment keys) are decided by `dialect`.
 */
export function migrations(dialect: Dialect): Record<string, Migration> {
  const serial = (table: ReturnType<Kysely<unknown>['schema']['createTable']>, column: string) =>
    dialect === 'postgres'
      ? table.addColumn(column, 'bigserial', (c) => c.primaryKey())
      : table.addColumn(column, 'integer', (c) => c.primaryKey().autoIncrement());

  return {
    '001_initial': {
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('zones')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('persons')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('presence', 'text', (c) => c.notNull())
          .addColumn('zone_id', 'text')
          .addColumn('last_seen', 'text')
          .addColumn('left_at', 'text')
          .addColumn('created_at', 'text', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('persons_left_at').on('persons').column('left_at').execute();
        await db.schema
          .createTable('nodes')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('quality', 'real', (c) => c.notNull())
          .addColumn('last_seen', 'text', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('settings')
          .addColumn('key', 'text', (c) => c.primaryKey())
          .addColumn('value', 'text', (c) => c.notNull())
          .addColumn('updated_at', 'text', (c) => c.notNull())
          .execute();
        await serial(db.schema.createTable('events'), 'seq')
          .addColumn('event_type', 'text', (c) => c.notNull())
          .addColumn('timestamp', 'text', (c) => c.notNull())
          .addColumn('payload', 'text', (c) => c.notNull())
          .execute();
        await serial(db.schema.createTable('baselines'), 'id')
          .addColumn('commit_sha', 'text', (c) => c.notNull())
          .addColumn('recorded_at', 'text', (c) => c.notNull())
          .addColumn('record', 'text', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('baselines_commit_sha').on('baselines').column('commit_sha').execute();
        await serial(db.schema.createTable('webhook_deliveries'), 'id')
          .addColumn('webhook_id', 'text', (c) => c.notNull())
          .addColumn('event_seq', 'bigint')
          .addColumn('event_type', 'text', (c) => c.notNull())
          .addColumn('url', 'text', (c) => c.notNull())
          .addColumn('payload', 'text', (c) => c.notNull())
          .addColumn('attempt', 'integer', (c) => c.notNull())
          .addColumn('state', 'text', (c) => c.notNull())
          .addColumn('due_at', 'text', (c) => c.notNull())
          .addColumn('status_code', 'integer')
          .addColumn('error', 'text')
          .addColumn('duration_ms', 'integer')
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('attempted_at', 'text')
          .execute();
        await db.schema.createIndex('webhook_deliveries_due').on('webhook_deliveries').columns(['state', 'due_at']).execute();
        await db.schema
          .createTable('bots')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('secret_encrypted', 'text', (c) => c.notNull())
          .addColumn('previous_secret_encrypted', 'text')
          .addColumn('previous_secret_expires_at', 'text')
          .addColumn('created_at', 'text', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('matches')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('status', 'text', (c) => c.notNull())
          .addColumn('replay', 'text')
          .addColumn('enrichment_requested_at', 'text')
          .addColumn('enrichment_status', 'text')
          .addColumn('commentary', 'text')
          .addColumn('enrichment_error', 'text')
          .addColumn('enrichment_completed_at', 'text')
          .addColumn('created_at', 'text', (c) => c.notNull())
          .execute();
        await serial(db.schema.createTable('enrichment_jobs'), 'id')
          .addColumn('match_id', 'text', (c) => c.notNull())
          .addColumn('bot_id', 'text', (c) => c.notNull())
          .addColumn('state', 'text', (c) => c.notNull())
          .addColumn('attempts', 'integer', (c) => c.notNull())
          .addColumn('run_after', 'text', (c) => c.notNull())
          .addColumn('lease_owner', 'text')
          .addColumn('lease_expires_at', 'text')
          .addColumn('enqueued_at', 'text', (c) => c.notNull())
          .addColumn('started_at', 'text')
          .addColumn('finished_at', 'text')
          .addColumn('last_error', 'text')
          .execute();
        // One job per match, ever: the database itself refuses a second enqueue.
        await db.schema.createIndex('enrichment_jobs_match').unique().on('enrichment_jobs').column('match_id').execute();
        await db.schema.createIndex('enrichment_jobs_bot_enqueued').on('enrichment_jobs').columns(['bot_id', 'enqueued_at']).execute();
        await db.schema.createIndex('enrichment_jobs_claim').on('enrichment_jobs').columns(['state', 'run_after']).execute();
        await db.schema
          .createTable('workers')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('heartbeat_at', 'text', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('nonces')
          .addColumn('key', 'text', (c) => c.primaryKey())
          .addColumn('expires_at', 'text', (c) => c.notNull())
          .execute();
        await sql`select 1`.execute(db);
      },
    },
    '002_jobs_by_state_and_id': {
      // The wait estimate counts queued and running jobs up to an id.
      async up(db: Kysely<any>) {
        await db.schema.createIndex('enrichment_jobs_state_id').on('enrichment_jobs').columns(['state', 'id']).execute();
      },
    },
    '003_fewer_writes_per_request': {
      // Every enrichment request writes a nonce and a job: fewer b-trees to update, fewer pages to commit.
      async up(db: Kysely<any>) {
        // Claims read jobs by state in id order: (state, id) serves them; (state, run_after) only cost writes.
        await db.schema.dropIndex('enrichment_jobs_claim').execute();
        if (dialect !== 'sqlite') return;
        // A text primary key on a rowid table is two b-trees; WITHOUT ROWID makes the key the table.
        await sql`create table nonces_by_key (key text primary key, expires_at text not null) without rowid`.execute(db);
        await sql`insert into nonces_by_key (key, expires_at) select key, expires_at from nonces`.execute(db);
        await db.schema.dropTable('nonces').execute();
        await sql`alter table nonces_by_key rename to nonces`.execute(db);
      },
    },
    '004_deliveries_by_state_and_id': {
      // The dispatcher claims due deliveries of one state in id order: walking (state, id) stops after
      // a batch, where (state, due_at) made it sort every waiting delivery first.
      async up(db: Kysely<any>) {
        await db.schema.createIndex('webhook_deliveries_state_id').on('webhook_deliveries').columns(['state', 'id']).execute();
        await db.schema.dropIndex('webhook_deliveries_due').execute();
      },
    },
    '005_deliveries_by_attempt_time': {
      // The settings' webhook status reads the latest attempt: without an index, a sort of the whole
      // delivery log on every read.
      async up(db: Kysely<any>) {
        await db.schema.createIndex('webhook_deliveries_attempted').on('webhook_deliveries').columns(['attempted_at', 'id']).execute();
      },
    },
    '006_admin_sessions': {
      // Server-side dashboard sessions, so sign-out ends a session for good (only the id's hash is kept).
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('admin_sessions')
          .addColumn('id_hash', 'text', (c) => c.primaryKey())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('last_seen_at', 'text', (c) => c.notNull())
          .addColumn('expires_at', 'text', (c) => c.notNull())
          .addColumn('token_check', 'text', (c) => c.notNull())
          .execute();
      },
    },
    '007_events_by_type': {
      // History filtered by type (the dashboard's fall history) walks one type's events in order.
      async up(db: Kysely<any>) {
        await db.schema.createIndex('events_by_type').on('events').columns(['event_type', 'seq']).execute();
      },
    },
    '008_baselines_in_run_order': {
      // Runs are ordered and compared by the record's timestamp, not by when they were posted: a
      // backfilled older run must not become "latest". Existing rows get it in the database's own
      // terms, as the same UTC text runAt (src/baselines/schema.ts) writes from now on.
      async up(db: Kysely<any>) {
        await db.schema
          .alterTable('baselines')
          .addColumn('run_at', 'text', (c) => c.notNull().defaultTo(''))
          .execute();
        const utc =
          dialect === 'postgres'
            ? sql`to_char((record::json->>'timestamp')::timestamptz at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
            : sql`strftime('%Y-%m-%dT%H:%M:%fZ', json_extract(record, '$.timestamp'))`;
        await db
          .updateTable('baselines')
          .set({ run_at: sql`coalesce(${utc}, recorded_at)` })
          .execute();
        await db.schema.createIndex('baselines_run_order').on('baselines').columns(['run_at', 'id']).execute();
        await db.schema.createIndex('baselines_commit_run_order').on('baselines').columns(['commit_sha', 'run_at', 'id']).execute();
        await db.schema.dropIndex('baselines_commit_sha').execute();
      },
    },
    '009_node_online_announced': {
      // Whether the node's coming online was announced (node.online), so a timeout announces
      // node.offline exactly once. Existing nodes start unannounced: their next heartbeat announces them.
      async up(db: Kysely<any>) {
        await db.schema
          .alterTable('nodes')
          .addColumn('online', 'integer', (c) => c.notNull().defaultTo(0))
          .execute();
      },
    },
    '010_enrichment_request_in_one_statement': {
      // PostgreSQL: an accepted enrichment request in one round trip instead of eight (see
      // enrichment/queue.ts, which keeps SQLite's path in TypeScript). Mirrors, in SQL: the event append
      // (events/log.ts: the advisory lock that makes seq order commit order) with its webhook outbox
      // row (webhook/outbox.ts: one pending delivery while the stored settings enable a URL), the
      // database nonce (enrichment/bot-auth.ts) and the request itself. PL/pgSQL, not one CTE: under
      // READ COMMITTED each statement of a function takes a fresh snapshot, so the statements after the
      // bot row lock see the jobs the previous holder committed; a single statement would not.
      async up(db: Kysely<any>) {
        if (dialect !== 'postgres') return;
        await sql`
          create function mothership_append_event(p_type text, p_timestamp text, p_payload text, p_webhook_id text, out seq bigint, out delivery boolean)
          language plpgsql as $$
          #variable_conflict use_column
          declare
            v_webhook json;
          begin
            perform pg_advisory_xact_lock(${sql.lit(EVENT_APPEND_LOCK)});
            insert into events (event_type, "timestamp", payload) values (p_type, p_timestamp, p_payload) returning events.seq into seq;
            select value::json -> 'webhook' into v_webhook from settings where key = 'integration';
            delivery := coalesce((v_webhook ->> 'enabled')::boolean, false) and coalesce(v_webhook ->> 'url', '') <> '';
            if delivery then
              insert into webhook_deliveries (webhook_id, event_seq, event_type, url, payload, attempt, state, due_at, created_at)
              values (p_webhook_id, seq, p_type, v_webhook ->> 'url', p_payload, 1, 'pending', p_timestamp, p_timestamp);
            end if;
          end $$`.execute(db);
        await sql`
          create function mothership_request_enrichment(
            p_bot text, p_match text, p_at text, p_since text, p_quota integer, p_nonce text, p_nonce_expires text,
            p_event_head text, p_event_tail text, p_webhook_id text)
          returns table (outcome text, job_id bigint, job_state text, requested_at text, match_status text, used integer, oldest text,
            queued bigint, running bigint, seq bigint, delivery boolean)
          language plpgsql as $$
          #variable_conflict use_column
          declare
            v_no_replay boolean;
          begin
            -- Already at quota: answered from a plain read, writing nothing (it stays so until the oldest counted job leaves the window).
            select count(*)::integer, min(enqueued_at) into used, oldest from enrichment_jobs where bot_id = p_bot and enqueued_at > p_since;
            if used >= p_quota then outcome := 'quota_exceeded'; return next; return; end if;
            -- Serializes one bot's requests on every instance; the statements below see what the previous holder committed.
            perform 1 from bots where id = p_bot for update;
            select count(*)::integer, min(enqueued_at) into used, oldest from enrichment_jobs where bot_id = p_bot and enqueued_at > p_since;
            if used >= p_quota then outcome := 'quota_exceeded'; return next; return; end if;
            -- A request refused for its match writes nothing, not even its nonce (as SQLite's rolled-back savepoint).
            select status, enrichment_requested_at, replay is null into match_status, requested_at, v_no_replay from matches where id = p_match;
            if not found then outcome := 'match_not_found'; return next; return; end if;
            if match_status <> 'completed' then outcome := 'match_not_completed'; return next; return; end if;
            -- Never requested and nothing to write commentary from: refused before it counts.
            if requested_at is null and v_no_replay then outcome := 'replay_unusable'; return next; return; end if;
            if p_nonce is not null then
              -- Inserted, or an expired entry taken over: first use; a live entry: a replay.
              insert into nonces as n (key, expires_at) values (p_nonce, p_nonce_expires)
                on conflict (key) do update set expires_at = excluded.expires_at where n.expires_at < p_at;
              if not found then outcome := 'replay'; return next; return; end if;
            end if;
            update matches set enrichment_requested_at = p_at, enrichment_status = 'queued', enrichment_error = null
              where id = p_match and status = 'completed' and enrichment_requested_at is null and replay is not null;
            if found then
              insert into enrichment_jobs (match_id, bot_id, state, attempts, run_after, enqueued_at)
                values (p_match, p_bot, 'queued', 0, p_at, p_at) returning id into job_id;
              outcome := 'queued';
              job_state := 'queued';
              requested_at := p_at;
              -- The event's JSON is built by the caller around the job id, which only this function knows.
              select a.seq, a.delivery into seq, delivery
                from mothership_append_event('enrichment.requested', p_at, p_event_head || job_id || p_event_tail, p_webhook_id) a;
            else
              -- Requested before, or changed since the read above (a fresh snapshot tells which).
              select status, enrichment_requested_at, replay is null into match_status, requested_at, v_no_replay from matches where id = p_match;
              if not found then outcome := 'match_not_found'; return next; return; end if;
              if match_status <> 'completed' then outcome := 'match_not_completed'; return next; return; end if;
              if requested_at is null and v_no_replay then outcome := 'replay_unusable'; return next; return; end if;
              select id, state into job_id, job_state from enrichment_jobs where match_id = p_match;
              outcome := 'duplicate';
            end if;
            -- The head of the queue, for the job's place in it (one index lookup each).
            select min(id) into queued from enrichment_jobs where state = 'queued';
            select min(id) into running from enrichment_jobs where state = 'running';
            return next;
          end $$`.execute(db);
      },
    },
    '011_api_tokens': {
      // Scoped API tokens: only the SHA-256 of each token is kept, looked up by that hash.
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('api_tokens')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('scope', 'text', (c) => c.notNull())
          .addColumn('token_hash', 'text', (c) => c.notNull().unique())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('last_used_at', 'text')
          .execute();
      },
    },
    '012_enrichment_requests_in_one_batch': {
      // PostgreSQL: the requests of one event-loop turn (at most 64) in one call, one transaction, so
      // one commit flush, and one hold of the event-append lock, serves all of them (enrichment/queue.ts,
      // EnrichmentQueue.runBatch). The rules per item are 010's, plus: a bot deleted since its secret was
      // cached is refused. A refused item writes nothing. Lock order: all bot rows by id, then all match
      // rows by id, then the append lock at the end, so batches on any instance never wait on each other
      // in a cycle. The match rows are locked before they are read, so each item is decided before it
      // writes. 010's functions are dropped: a batch that fails is retried request by request, each as a
      // batch of one.
      async up(db: Kysely<any>) {
        if (dialect !== 'postgres') return;
        await sql`
          create function mothership_request_enrichment_batch(
            p_bots text[], p_matches text[], p_ats text[], p_sinces text[], p_quota integer, p_nonces text[], p_nonce_expires text[],
            p_event_heads text[], p_event_tails text[], p_webhook_ids text[])
          returns table (idx integer, outcome text, job_id bigint, job_state text, requested_at text, match_status text, used integer,
            oldest text, queued bigint, running bigint, seq bigint, delivery boolean)
          language plpgsql as $$
          #variable_conflict use_column
          declare
            v_n integer := coalesce(array_length(p_bots, 1), 0);
            v_outcome text[] := array_fill(null::text, array[v_n]);
            v_job bigint[] := array_fill(null::bigint, array[v_n]);
            v_state text[] := array_fill(null::text, array[v_n]);
            v_requested text[] := array_fill(null::text, array[v_n]);
            v_status text[] := array_fill(null::text, array[v_n]);
            v_used integer[] := array_fill(null::integer, array[v_n]);
            v_oldest text[] := array_fill(null::text, array[v_n]);
            v_seq bigint[] := array_fill(null::bigint, array[v_n]);
            v_delivery boolean[] := array_fill(null::boolean, array[v_n]);
            v_used1 integer;
            v_oldest1 text;
            v_status1 text;
            v_requested1 text;
            v_no_replay boolean;
            v_job1 bigint;
            v_state1 text;
            v_webhook json;
            v_deliver boolean;
            v_payload text;
            v_queued bigint;
            v_running bigint;
            i integer;
            v_bot text;
            v_bots text[] := '{}';
          begin
            -- The bots that still exist (another instance may have served a secret cached for 5 s after a deletion).
            for v_bot in select id from bots where id = any(p_bots) order by id for update loop
              v_bots := v_bots || v_bot;
            end loop;
            perform 1 from matches where id = any(p_matches) order by id for update;
            for i in 1 .. v_n loop
              -- A deleted bot's row lock would serialize nothing: refused before it can count.
              if not p_bots[i] = any(v_bots) then v_outcome[i] := 'unknown_bot'; continue; end if;
              -- A fresh statement after the locks: sees what earlier holders committed, and this batch's own jobs.
              select count(*)::integer, min(enqueued_at) into v_used1, v_oldest1 from enrichment_jobs
                where bot_id = p_bots[i] and enqueued_at > p_sinces[i];
              v_used[i] := v_used1;
              v_oldest[i] := v_oldest1;
              if v_used1 >= p_quota then v_outcome[i] := 'quota_exceeded'; continue; end if;
              select status, enrichment_requested_at, replay is null into v_status1, v_requested1, v_no_replay from matches where id = p_matches[i];
              if not found then v_outcome[i] := 'match_not_found'; continue; end if;
              v_status[i] := v_status1;
              if v_status1 <> 'completed' then v_outcome[i] := 'match_not_completed'; continue; end if;
              if v_requested1 is null and v_no_replay then v_outcome[i] := 'replay_unusable'; continue; end if;
              if p_nonces[i] is not null then
                insert into nonces as n (key, expires_at) values (p_nonces[i], p_nonce_expires[i])
                  on conflict (key) do update set expires_at = excluded.expires_at where n.expires_at < p_ats[i];
                if not found then v_outcome[i] := 'replay'; continue; end if;
              end if;
              if v_requested1 is null then
                update matches set enrichment_requested_at = p_ats[i], enrichment_status = 'queued', enrichment_error = null where id = p_matches[i];
                insert into enrichment_jobs (match_id, bot_id, state, attempts, run_after, enqueued_at)
                  values (p_matches[i], p_bots[i], 'queued', 0, p_ats[i], p_ats[i]) returning id into v_job1;
                v_outcome[i] := 'queued';
                v_job[i] := v_job1;
                v_state[i] := 'queued';
                v_requested[i] := p_ats[i];
              else
                select id, state into v_job1, v_state1 from enrichment_jobs where match_id = p_matches[i];
                v_outcome[i] := 'duplicate';
                v_job[i] := v_job1;
                v_state[i] := v_state1;
                v_requested[i] := v_requested1;
              end if;
            end loop;
            select min(id) into v_queued from enrichment_jobs where state = 'queued';
            select min(id) into v_running from enrichment_jobs where state = 'running';
            -- The events last, under the append lock held to the commit (seq order is commit order), in input order.
            if 'queued' = any(v_outcome) then
              perform pg_advisory_xact_lock(${sql.lit(EVENT_APPEND_LOCK)});
              select value::json -> 'webhook' into v_webhook from settings where key = 'integration';
              v_deliver := coalesce((v_webhook ->> 'enabled')::boolean, false) and coalesce(v_webhook ->> 'url', '') <> '';
              for i in 1 .. v_n loop
                if v_outcome[i] = 'queued' then
                  v_payload := p_event_heads[i] || v_job[i] || p_event_tails[i];
                  insert into events (event_type, "timestamp", payload) values ('enrichment.requested', p_ats[i], v_payload) returning events.seq into v_job1;
                  v_seq[i] := v_job1;
                  v_delivery[i] := v_deliver;
                  if v_deliver then
                    insert into webhook_deliveries (webhook_id, event_seq, event_type, url, payload, attempt, state, due_at, created_at)
                    values (p_webhook_ids[i], v_job1, 'enrichment.requested', v_webhook ->> 'url', v_payload, 1, 'pending', p_ats[i], p_ats[i]);
                  end if;
                end if;
              end loop;
            end if;
            for i in 1 .. v_n loop
              return query select i, v_outcome[i], v_job[i], v_state[i], v_requested[i], v_status[i], v_used[i], v_oldest[i],
                v_queued, v_running, v_seq[i], v_delivery[i];
            end loop;
          end $$`.execute(db);
        // Every request goes through the batch function now (a failed batch retries each request as a batch of one).
        await sql`drop function mothership_request_enrichment(text, text, text, text, integer, text, text, text, text, text)`.execute(db);
        await sql`drop function mothership_append_event(text, text, text, text)`.execute(db);
      },
    },
    '013_run_at_by_the_database': {
      // The previous release inserts baselines without run_at (008 gave it a default of ''), and an
      // empty run_at sorts as the oldest run. The database fills it on insert from the record, as
      // 008 did for the rows it found, and repairs the rows written so meanwhile. Also the table in
      // which each release that migrates the schema records its version (database.ts), so a release
      // that finds a schema it does not know can say which release wrote it.
      async up(db: Kysely<any>) {
        if (dialect === 'postgres') {
          // An unreadable timestamp falls back to recorded_at rather than refusing the insert.
          await sql`
            create function mothership_run_at(p_record text, p_recorded_at text) returns text
            language plpgsql stable as $$
            begin
              return coalesce(to_char((p_record::json->>'timestamp')::timestamptz at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), p_recorded_at);
            exception when others then
              return p_recorded_at;
            end $$`.execute(db);
          await sql`
            create function mothership_fill_run_at() returns trigger language plpgsql as $$
            begin
              if new.run_at = '' then new.run_at := mothership_run_at(new.record, new.recorded_at); end if;
              return new;
            end $$`.execute(db);
          await sql`create trigger baselines_fill_run_at before insert or update on baselines for each row execute function mothership_fill_run_at()`.execute(
            db,
          );
          await sql`update baselines set run_at = mothership_run_at(record, recorded_at) where run_at = ''`.execute(db);
        } else {
          const runAt = (record: string, recordedAt: string) =>
            `coalesce(strftime('%Y-%m-%dT%H:%M:%fZ', case when json_valid(${record}) then json_extract(${record}, '$.timestamp') end), ${recordedAt})`;
          await sql
            .raw(
              `create trigger baselines_fill_run_at after insert on baselines for each row when new.run_at = '' begin ` +
                `update baselines set run_at = ${runAt('new.record', 'new.recorded_at')} where id = new.id; end`,
            )
            .execute(db);
          await sql.raw(`update baselines set run_at = ${runAt('record', 'recorded_at')} where run_at = ''`).execute(db);
        }
        await db.schema
          .createTable('schema_releases')
          .addColumn('schema', 'text', (c) => c.primaryKey())
          .addColumn('version', 'text', (c) => c.notNull())
          .addColumn('migrated_at', 'text', (c) => c.notNull())
          .execute();
      },
    },
    '015_node_names_and_zones': {
      // Nodes an admin names and places in a zone. Nullable: earlier releases insert nodes without them.
      async up(db: Kysely<any>) {
        await db.schema.alterTable('nodes').addColumn('name', 'text').execute();
        await db.schema.alterTable('nodes').addColumn('zone_id', 'text').execute();
      },
    },
    '016_bounded_logs': {
      // The dispatcher's lanes (webhook/service.ts) claim first attempts and retries apart, each in
      // (attempt, id) order; the delivery log's filters (by event type, by state and event type) walk
      // an index newest first instead of the whole log.
      async up(db: Kysely<any>) {
        await db.schema.createIndex('webhook_deliveries_lane').on('webhook_deliveries').columns(['state', 'attempt', 'id']).execute();
        await db.schema.createIndex('webhook_deliveries_type').on('webhook_deliveries').columns(['event_type', 'id']).execute();
        await db.schema.createIndex('webhook_deliveries_state_type').on('webhook_deliveries').columns(['state', 'event_type', 'id']).execute();
        // PostgreSQL: the bytes each log keeps, for the storage budget (db/usage.ts). A table's size on
        // disk does not shrink when rows are deleted (the space is reused after VACUUM), so it cannot
        // say what is kept; statement triggers keep this count in the writing transaction, whichever
        // process or release writes. Each row counts its payload and LOG_ROW_OVERHEAD for the rest.
        if (dialect !== 'postgres') return;
        const rowBytes = sql.raw(`octet_length(payload) + ${LOG_ROW_OVERHEAD}`);
        await sql`create table log_usage (log text primary key, bytes bigint not null)`.execute(db);
        for (const table of ['events', 'webhook_deliveries'])
          await sql`insert into log_usage select ${table}, coalesce(sum(${rowBytes}), 0) from ${sql.table(table)}`.execute(db);
        await logUsageFunction('mothership_log_usage', rowBytes).execute(db);
        for (const table of ['events', 'webhook_deliveries']) {
          await sql`create trigger ${sql.raw(table + '_usage_insert')} after insert on ${sql.table(table)}
            referencing new table as new_rows for each statement execute function mothership_log_usage()`.execute(db);
          await sql`create trigger ${sql.raw(table + '_usage_delete')} after delete on ${sql.table(table)}
            referencing old table as old_rows for each statement execute function mothership_log_usage()`.execute(db);
        }
      },
    },
    '019_mqtt_retained': {
      // What the MQTT owner left retained on the broker, so clearing is this record minus what should
      // exist rather than a read-back the broker may cut short. `payload_hash` null: content unknown.
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('mqtt_retained')
          .addColumn('topic', 'text', (c) => c.primaryKey())
          .addColumn('payload_hash', 'text')
          .addColumn('updated_at', 'text', (c) => c.notNull())
          .execute();
      },
    },
    '021_dashboard_users': {
      // Named dashboard users with a role, and sessions that belong to one (or to the admin token: user_id
      // null) and may be remembered for 30 days. Nullable columns: earlier releases insert sessions
      // without them, and refuse a user's session (its token_check is not theirs).
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('users')
          .addColumn('username', 'text', (c) => c.primaryKey())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('role', 'text', (c) => c.notNull())
          .addColumn('password_hash', 'text', (c) => c.notNull())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .execute();
        await db.schema.alterTable('admin_sessions').addColumn('user_id', 'text').execute();
        await db.schema.alterTable('admin_sessions').addColumn('remembered', 'integer').execute();
        await db.schema.alterTable('admin_sessions').addColumn('device', 'text').execute();
        await db.schema.createIndex('admin_sessions_by_user').on('admin_sessions').column('user_id').execute();
      },
    },
    '022_webhook_subscriptions_and_log': {
      // The delivery log keeps the start of each answer (nullable: the previous release writes rows
      // without it); a delivery's attempts are found by webhook-id (an attempt marks the one it
      // retried, "redeliver all failed" skips deliveries sent again since); attempts retried before
      // this release are marked as such. On PostgreSQL, the enrichment batch function queues a
      // delivery only when the webhook subscribes to enrichment.requested (settings/model.ts).
      async up(db: Kysely<any>) {
        await db.schema.alterTable('webhook_deliveries').addColumn('response_body', 'text').execute();
        await db.schema.createIndex('webhook_deliveries_webhook_id').on('webhook_deliveries').columns(['webhook_id', 'id']).execute();
        await sql`
          update webhook_deliveries set state = 'retried'
          where state = 'retry_scheduled' and exists (
            select 1 from webhook_deliveries later
            where later.webhook_id = webhook_deliveries.webhook_id and later.id > webhook_deliveries.id
              and later.state in ('delivered', 'failed', 'retry_scheduled'))`.execute(db);
        if (dialect !== 'postgres') return;
        const unconditional = `v_deliver := coalesce((v_webhook ->> 'enabled')::boolean, false) and coalesce(v_webhook ->> 'url', '') <> '';`;
        const subscribed =
          unconditional.slice(0, -1) +
          ` and (json_typeof(v_webhook -> 'event_types') is distinct from 'array' or exists (` +
          `select 1 from json_array_elements_text(v_webhook -> 'event_types') as subscribed(type) where subscribed.type = 'enrichment.requested'));`;
        const { rows } = await sql<{ definition: string }>`
          select pg_get_functiondef('mothership_request_enrichment_batch'::regproc) as definition`.execute(db);
        const definition = rows[0]!.definition;
        if (definition.split(unconditional).length !== 2) throw new Error('mothership_request_enrichment_batch: the delivery condition was not found');
        await sql.raw(definition.replace(unconditional, subscribed)).execute(db);
      },
    },
    '023_log_usage_as_stored': {
      // PostgreSQL: migration 016 counted a row's payload length, but a payload beyond about 2 KB is
      // stored in TOAST chunks that take up to half as much again, so the logs' files outgrew the
      // budget. The triggers now count what a row takes (STORED_ROW_BYTES_SQL). The delivery log is
      // recounted with its writers held off. The event log is not locked: from 0.2.0 this runs in the
      // one transaction of 021 to 023, where 022 already holds the delivery log, and waiting for the
      // event log too deadlocked with a 0.2.0 append (its event written, its delivery next). What its
      // rows take beyond 016's count goes into a row of its own, which the triggers leave alone
      // (storageBytes sums the rows); an append in flight meanwhile keeps 016's count for its row.
      async up(db: Kysely<any>) {
        if (dialect !== 'postgres') return;
        const rowBytes = sql.raw(STORED_ROW_BYTES_SQL);
        await logUsageFunction('mothership_log_usage', rowBytes).execute(db);
        await sql`lock table webhook_deliveries in share mode`.execute(db);
        await sql`update log_usage set bytes = (select coalesce(sum(${rowBytes}), 0) from webhook_deliveries) where log = 'webhook_deliveries'`.execute(db);
        await sql`insert into log_usage select 'events_as_stored', coalesce(sum(${rowBytes} - (octet_length(payload) + ${sql.raw(String(LOG_ROW_OVERHEAD))})), 0) from events`.execute(
          db,
        );
      },
    },
    '024_deliveries_by_due_time': {
      // Each dispatcher lane's due rows in due order (webhook/service.ts, dueDeliveries), without
      // walking the retries still waiting.
      async up(db: Kysely<any>) {
        await db.schema.createIndex('webhook_deliveries_due').on('webhook_deliveries').columns(['state', 'attempt', 'due_at', 'id']).execute();
      },
    },
    '025_delivery_rows_as_stored': {
      // PostgreSQL: a delivery row took 2 to 21 times what 016 and 023 counted: its other columns and
      // ten index entries in each of its versions (pending, sending, finished), and the receiver's
      // answer, which an update writes. Its rows now count STORED_DELIVERY_BYTES_SQL, and an update of
      // the answer counts the change; recounted with the delivery log's writers held off (from 0.2.0,
      // 022 holds that lock already in the same transaction).
      async up(db: Kysely<any>) {
        if (dialect !== 'postgres') return;
        const rowBytes = sql.raw(STORED_DELIVERY_BYTES_SQL);
        await logUsageFunction('mothership_delivery_usage', rowBytes).execute(db);
        for (const [trigger, event, rows] of [
          ['webhook_deliveries_usage_insert', 'insert', 'new table as new_rows'],
          ['webhook_deliveries_usage_delete', 'delete', 'old table as old_rows'],
        ] as const) {
          await sql`drop trigger ${sql.raw(trigger)} on webhook_deliveries`.execute(db);
          await sql`create trigger ${sql.raw(trigger)} after ${sql.raw(event)} on webhook_deliveries
            referencing ${sql.raw(rows)} for each statement execute function mothership_delivery_usage()`.execute(db);
        }
        const answer = (row: 'new' | 'old') => sql.raw(deliveryAnswerBytesSql(row));
        await sql`
          create function mothership_delivery_answer_usage() returns trigger language plpgsql as $$
          begin
            update log_usage set bytes = bytes + ${answer('new')} - ${answer('old')} where log = 'webhook_deliveries';
            return null;
          end $$`.execute(db);
        await sql`create trigger webhook_deliveries_usage_answer after update of response_body, error on webhook_deliveries
          for each row execute function mothership_delivery_answer_usage()`.execute(db);
        await sql`lock table webhook_deliveries in share mode`.execute(db);
        await sql`update log_usage set bytes = (select coalesce(sum(${rowBytes}), 0) from webhook_deliveries) where log = 'webhook_deliveries'`.execute(db);
      },
    },
    '026_persons_by_zone': {
      // A zone's occupancy (each move's counts, a zone's occupants, a zone's deletion) read every
      // person without it.
      async up(db: Kysely<any>) {
        await db.schema.createIndex('persons_zone').on('persons').column('zone_id').execute();
      },
    },
    '027_log_usage_per_connection': {
      // PostgreSQL: every writer of a log updated that log's one `log_usage` row and held its lock to
      // its commit, so appends waited for the webhook dispatcher's answers and the keeper's deletes,
      // and a delete and a dispatcher's update deadlocked (each holding a row the other needed). Each
      // connection now adds to a row of its own (`<log>:<n>`, n its backend's pid modulo
      // USAGE_SHARDS); the count stays the sum of the rows, as every release reads it. Only the
      // functions change: altering the table would wait for a 0.2.0 append holding a row of it while
      // this transaction holds the delivery log (022), a deadlock.
      async up(db: Kysely<any>) {
        if (dialect !== 'postgres') return;
        await logUsageFunction('mothership_log_usage', sql.raw(STORED_ROW_BYTES_SQL), shardedAdd).execute(db);
        await logUsageFunction('mothership_delivery_usage', sql.raw(STORED_DELIVERY_BYTES_SQL), shardedAdd).execute(db);
        const answer = (row: 'new' | 'old') => sql.raw(deliveryAnswerBytesSql(row));
        await sql`
          create or replace function mothership_delivery_answer_usage() returns trigger language plpgsql as $$
          begin
            ${shardedAdd(sql`'webhook_deliveries'`, '+', sql`${answer('new')} - ${answer('old')}`)};
            return null;
          end $$`.execute(db);
      },
    },
    '028_deliveries_lane_index_dropped': {
      // 016's (state, attempt, id) index: no query needs it since 024's due-time index took the lanes'
      // claims (SQLite still chose it for the pending counts and some updates, which other indexes
      // serve as well), and every delivery's insert and state change wrote it.
      async up(db: Kysely<any>) {
        await db.schema.dropIndex('webhook_deliveries_lane').execute();
      },
    },
    '029_matches_by_creation': {
      // The match list, newest first: without it each read sorted every match, holding SQLite's one
      // connection meanwhile.
      async up(db: Kysely<any>) {
        await db.schema.createIndex('matches_by_creation').on('matches').columns(['created_at desc', 'id']).execute();
      },
    },
    '030_baseline_usage': {
      // The bytes the baseline rows take (each its record and BASELINE_ROW_OVERHEAD), counted by
      // triggers so that every release's pushes count: BASELINE_STORAGE_MB bounds them, and SQLite's
      // storage budget leaves them out of the logs'.
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('baseline_usage')
          .addColumn('id', 'integer', (c) => c.primaryKey())
          .addColumn('bytes', 'bigint', (c) => c.notNull())
          .execute();
        const bytes = (row: string) => sql.raw(baselineRowBytesSql(dialect, row));
        if (dialect === 'postgres') {
          await sql`lock table baselines in share mode`.execute(db);
          await sql`
            create function mothership_baseline_usage() returns trigger language plpgsql as $$
            begin
              if tg_op = 'INSERT' then
                update baseline_usage set bytes = bytes + ${bytes('new')} where id = 1;
              else
                update baseline_usage set bytes = bytes - ${bytes('old')} where id = 1;
              end if;
              return null;
            end $$`.execute(db);
          await sql`create trigger baselines_usage after insert or delete on baselines for each row execute function mothership_baseline_usage()`.execute(db);
        } else {
          await sql`create trigger baselines_usage_insert after insert on baselines begin
            update baseline_usage set bytes = bytes + ${bytes('new')} where id = 1; end`.execute(db);
          await sql`create trigger baselines_usage_delete after delete on baselines begin
            update baseline_usage set bytes = bytes - ${bytes('old')} where id = 1; end`.execute(db);
        }
        await sql`insert into baseline_usage (id, bytes) select 1, coalesce(sum(${bytes('baselines')}), 0) from baselines`.execute(db);
      },
    },
    '031_names_by_key': {
      // A create by name looks for the name among rows of the same key (presence's nameKey) over an
      // index instead of reading every name. The key is computed by this release, not by SQL (Unicode
      // compatibility forms), so rows without one (written before, or by the previous release) stay
      // null and are keyed when a create first reads them; a rename that leaves the key as it was (the
      // previous release's) makes it null again, so a stale key never answers for a new name.
      async up(db: Kysely<any>) {
        for (const table of ['persons', 'zones']) {
          await db.schema.alterTable(table).addColumn('name_key', 'text').execute();
          await db.schema.createIndex(`${table}_by_name_key`).on(table).column('name_key').execute();
          if (dialect === 'postgres') {
            await sql`create function ${sql.raw(`mothership_${table}_name_renamed`)}() returns trigger language plpgsql as $$
              begin
                if new.name is distinct from old.name and new.name_key is not distinct from old.name_key then
                  new.name_key := null;
                end if;
                return new;
              end $$`.execute(db);
            await sql`create trigger ${sql.raw(`${table}_name_renamed`)} before update of name on ${sql.table(table)}
              for each row execute function ${sql.raw(`mothership_${table}_name_renamed`)}()`.execute(db);
          } else {
            await sql`create trigger ${sql.raw(`${table}_name_renamed`)} after update of name on ${sql.table(table)}
              when new.name is not old.name and new.name_key is old.name_key
              begin update ${sql.table(table)} set name_key = null where id = new.id; end`.execute(db);
          }
        }
      },
    },
    '032_commits_found_in_any_case': {
      // A sha in either case is one commit: histories and `compare` look commits up by
      // `lower(commit_sha)`, through this index. The column stays as sent (expand-only): the previous
      // release, beside this one during an upgrade, still finds a commit by the sha it stored.
      async up(db: Kysely<any>) {
        await sql`create index baselines_commit_key_run_order on baselines (lower(commit_sha), run_at, id)`.execute(db);
      },
    },
  };
}

/** How many `log_usage` rows a log's count spreads over (migration 027): two connections share one only if their pids do modulo this. */
export const USAGE_SHARDS = 64;
/** A statement adding `bytes` to `log`'s count: its one row (migrations 016 to 025). */
type AddUsage = (log: RawBuilder<unknown>, sign: '+' | '-', bytes: RawBuilder<unknown>) => RawBuilder<unknown>;
const singleRowAdd: AddUsage = (log, sign, bytes) => sql`update log_usage set bytes = bytes ${sql.raw(sign)} ${bytes} where log = ${log}`;
/** Migration 027: to the connection's own row of the log, so concurrent writers do not wait on one row lock. */
const shardedAdd: AddUsage = (log, sign, bytes) => sql`insert into log_usage (log, bytes)
      values (${log} || ':' || pg_backend_pid() % ${sql.raw(String(USAGE_SHARDS))}, ${sql.raw(sign === '-' ? '-' : '')}${bytes})
      on conflict (log) do update set bytes = log_usage.bytes + excluded.bytes`;

/** PostgreSQL: a trigger function keeping log_usage (migrations 016, 023, 025 and 027), counting `rowBytes` per row. */
const logUsageFunction = (name: string, rowBytes: RawBuilder<unknown>, add: AddUsage = singleRowAdd) => sql`
  create or replace function ${sql.raw(name)}() returns trigger language plpgsql as $$
  begin
    if tg_op = 'INSERT' then
      ${add(sql`tg_table_name`, '+', sql`(select coalesce(sum(${rowBytes}), 0) from new_rows)`)};
    else
      ${add(sql`tg_table_name`, '-', sql`(select coalesce(sum(${rowBytes}), 0) from old_rows)`)};
    end if;
    return null;
  end $$`;
