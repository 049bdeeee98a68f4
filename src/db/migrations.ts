import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from './schema.js';

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
        await db.schema.alterTable('baselines').addColumn('run_at', 'text', (c) => c.notNull().defaultTo('')).execute();
        const utc =
          dialect === 'postgres'
            ? sql`to_char((record::json->>'timestamp')::timestamptz at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
            : sql`strftime('%Y-%m-%dT%H:%M:%fZ', json_extract(record, '$.timestamp'))`;
        await db.updateTable('baselines').set({ run_at: sql`coalesce(${utc}, recorded_at)` }).execute();
        await db.schema.createIndex('baselines_run_order').on('baselines').columns(['run_at', 'id']).execute();
        await db.schema.createIndex('baselines_commit_run_order').on('baselines').columns(['commit_sha', 'run_at', 'id']).execute();
        await db.schema.dropIndex('baselines_commit_sha').execute();
      },
    },
    '009_node_online_announced': {
      // Whether the node's coming online was announced (node.online), so a timeout announces
      // node.offline exactly once. Existing nodes start unannounced: their next heartbeat announces them.
      async up(db: Kysely<any>) {
        await db.schema.alterTable('nodes').addColumn('online', 'integer', (c) => c.notNull().defaultTo(0)).execute();
      },
    },
  };
}
