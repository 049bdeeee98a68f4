import { type Kysely, sql } from 'kysely';
import { type Database, now } from './database.js';
import { STORED_DELIVERY_BYTES_SQL, STORED_ROW_BYTES_SQL } from './schema.js';

/** Rows deleted per statement: each holds the write lock briefly, so requests keep flowing meanwhile. */
export const PRUNE_CHUNK = 1000;

/** An append-only log: its key grows with its time column, so its oldest rows come first by key. */
export interface LogTable {
  table: 'events' | 'webhook_deliveries';
  key: 'seq' | 'id';
  time: 'timestamp' | 'created_at';
  /** Only rows in this state (walked over a (state, key) index). */
  state?: string;
}

/** PostgreSQL: what the storage budget's triggers count for a row of each log (migrations 023 and 025). */
const COUNTED_BYTES_SQL: Record<LogTable['table'], string> = { events: STORED_ROW_BYTES_SQL, webhook_deliveries: STORED_DELIVERY_BYTES_SQL };

/** `query` narrowed to the rows of `log` that may go (its `state`, when it has one). */
const inState = <Q extends { where: (column: string, op: '=', value: string) => Q }>(log: LogTable, query: Q): Q =>
  log.state ? query.where('state', '=', log.state) : query;

/**
 * Deletes the rows of `log` older than `cutoff` (ISO 8601), oldest first, `chunk` rows per statement,
 * and returns how many. Each pass looks only at the next `chunk` rows by key (an index walk, never a
 * scan of the log) and deletes the expired ones among them; it walks on while a chunk holds only rows
 * that are expired or stamped after now (written while the clock ran ahead, which would otherwise
 * stop every pass at them until that time), letting other work run between chunks.
 */
export async function pruneOlderThan(database: Database, log: LogTable, cutoff: string, chunk = PRUNE_CHUNK): Promise<number> {
  let total = 0;
  let after: number | null = null;
  for (;;) {
    const pass = await database.write(async (handle) => {
      // Table and columns vary by log, beyond what the typed builder can follow: build it untyped.
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- see above: untyped on purpose
      const db = handle as unknown as Kysely<any>;
      const from = <Q extends { where: (column: string, op: '>', value: number) => Q }>(query: Q): Q =>
        after === null ? query : query.where(log.key, '>', after);
      const head = from(inState(log, db.selectFrom(log.table).select([log.key, log.time])))
        .orderBy(log.key)
        .limit(chunk)
        .as('head');
      const summary = await db
        .selectFrom(head)
        .select((eb) => [
          eb.fn.max(`head.${log.key}`).as('last'),
          eb.fn.countAll().as('rows'),
          eb.fn
            .count(
              eb
                .case()
                .when(eb.and([eb(`head.${log.time}`, '>=', cutoff), eb(`head.${log.time}`, '<=', now())]))
                .then(1)
                .end(),
            )
            .as('live'),
        ])
        .executeTakeFirstOrThrow();
      if (summary.last === null) return { deleted: 0, walkOn: false, last: after };
      // The time test on every row: a young row among expired ones (written out of time order) stays.
      const result = await from(inState(log, db.deleteFrom(log.table).where(log.key, '<=', summary.last).where(log.time, '<', cutoff))).executeTakeFirst();
      return { deleted: Number(result.numDeletedRows), walkOn: Number(summary.rows) === chunk && Number(summary.live) === 0, last: Number(summary.last) };
    });
    total += pass.deleted;
    if (!pass.walkOn) return total;
    after = pass.last;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * Deletes about `chunk` of the oldest rows across `logs` (the storage budget's order) and returns how
 * many (0 once every log is empty) and, on PostgreSQL, the bytes the budget's triggers counted for
 * them (what waits for `reclaim`; 0 on SQLite): the cutoff is the `chunk`-th oldest time among the
 * logs' heads (each log's `chunk` first rows by key, an index walk), and each log loses the rows of its
 * head up to it. Every statement reads a bounded head, never the rest of a log, however the logs
 * interleave in time.
 */
export async function pruneOldest(database: Database, logs: LogTable[], chunk: number): Promise<{ rows: number; bytes: number }> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- as in pruneOlderThan: table and columns vary by log
  const db = database.db as unknown as Kysely<any>;
  let previous: string | null = null;
  for (;;) {
    const times: string[] = [];
    for (const log of logs) {
      const head = await inState(log, db.selectFrom(log.table).select(`${log.time} as time`))
        .orderBy(log.key)
        .limit(chunk)
        .execute();
      for (const row of head) times.push(String(row.time));
    }
    if (times.length === 0) return { rows: 0, bytes: 0 };
    const cutoff = times.sort()[Math.min(chunk, times.length) - 1]!;
    const deleted = await database.write(async (handle) => {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- see above
      const writer = handle as unknown as Kysely<any>;
      const total = { rows: 0, bytes: 0 };
      for (const log of logs) {
        const head = inState(log, writer.selectFrom(log.table).select(log.key)).orderBy(log.key).limit(chunk);
        // PostgreSQL: a row another transaction holds (the dispatcher marking an attempt retried) is
        // skipped, not waited for: waiting, the delete and that transaction's next row deadlocked. Only
        // a second try that found nothing else waits: 0 rows would have the keeper abandon deliveries.
        const skipHeld = database.dialect === 'postgres' && previous === null;
        const remove = inState(
          log,
          writer
            .deleteFrom(log.table)
            .where(log.key, 'in', skipHeld ? head.forUpdate().skipLocked() : head)
            .where(log.time, '<=', cutoff),
        );
        if (database.dialect === 'postgres') {
          const gone = await remove.returning(sql<string>`${sql.raw(COUNTED_BYTES_SQL[log.table])}`.as('bytes')).execute();
          total.rows += gone.length;
          total.bytes += gone.reduce((sum, row) => sum + Number(row.bytes), 0);
        } else total.rows += Number((await remove.executeTakeFirst()).numDeletedRows);
      }
      return total;
    });
    // None: another instance's keeper (or the retention) deleted these rows between the read and the
    // delete, or (PostgreSQL) others held them. 0 would tell the keeper that nothing is left and have
    // it abandon waiting deliveries: read the heads again, as long as they moved.
    if (deleted.rows > 0 || cutoff === previous) return deleted;
    previous = cutoff;
  }
}

/**
 * PostgreSQL: a mark taken after deleting rows from a log, for `reclaim`; null on SQLite, which reuses
 * a deleted row's pages at once.
 */
export async function deletionMark(database: Database): Promise<bigint | null> {
  if (database.dialect !== 'postgres') return null;
  const { rows } = await sql<{ next: string }>`select pg_snapshot_xmax(pg_current_snapshot())::text as next`.execute(database.db);
  return BigInt(rows[0]!.next);
}

/**
 * Makes the space of the rows deleted before the newest of `marks` (deletionMark) it can reusable, and
 * answers which mark that was (null: none yet). PostgreSQL reuses a deleted row's space only after a
 * VACUUM, which frees nothing while a transaction that began before the delete is still open, so a
 * mark is clear once no such transaction is left; autovacuum at its defaults comes too late for a
 * writer that fills the budget within a minute. SKIP_LOCKED: a table another instance is vacuuming is
 * left to that vacuum.
 */
export async function reclaim(database: Database, logs: LogTable[], marks: readonly bigint[]): Promise<bigint | null> {
  const tables = [...new Set(logs.map((log) => log.table))];
  // What holds a VACUUM back from the rows deleted before a mark: a transaction id older than it, in any
  // database of the cluster (the oldest running one, prepared transactions of two-phase commit
  // included, is every new snapshot's xmin here, so a VACUUM frees the rows only at a moment when no
  // session here is in a statement); a snapshot of a session here that began before the delete (one
  // may hold no transaction id); a hot standby's queries under hot_standby_feedback, through its
  // replication slot's xmin (any slot's holds every database back) or, without a slot, through its
  // walsender: a session of no database, the only such that holds an xmin (its `backend_type` is
  // hidden from a role that is neither a superuser nor the replication role). Not a running VACUUM of
  // another table: PostgreSQL lets no vacuum's snapshot hold back what another may free (such a role
  // is not shown the table of another role's VACUUM, autovacuum's, which then counts until it ends:
  // the safe side). A VACUUM of a log itself (autovacuum, another instance's keeper) that began before
  // the delete counts: SKIP_LOCKED below skips that log, and it cannot free those rows either.
  const { rows } = await sql<{ clear: string | null }>`
    select max(mark::text::numeric)::text as clear from unnest(${marks.map(String)}::xid8[]) as mark
    where pg_snapshot_xmin(pg_current_snapshot()) >= mark
    and not exists (select 1 from pg_stat_activity where (datname = current_database() or datname is null)
      and pid <> pg_backend_pid()
      and pid not in (select pid from pg_stat_progress_vacuum where relid not in (
        select oid from pg_class where oid = any(${tables}::regclass[])
        union select reltoastrelid from pg_class where oid = any(${tables}::regclass[])))
      and age(backend_xmin) > age(xid(mark)))
    and not exists (select 1 from pg_replication_slots where age(xmin) > age(xid(mark)))`.execute(database.db);
  const clear = rows[0]?.clear;
  if (clear == null) return null;
  await sql`vacuum (skip_locked) ${sql.join(tables.map((table) => sql.table(table)))}`.execute(database.db);
  return BigInt(clear);
}
