import { chmodSync, closeSync, openSync } from 'node:fs';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, Migrator, PostgresDialect, SqliteDialect, sql } from 'kysely';
import type pg from 'pg';
import path from 'node:path';
import { migrations } from './migrations.js';
import { KNOWN_MIGRATIONS, SCHEMA_VERSION, unknownSchema } from './schema-version.js';
import { VERSION } from '../version.js';
import { startCheckpointer, type Checkpointer } from './checkpointer.js';
import { WriteHealth } from './errors.js';
import { GroupCommit } from './group-commit.js';
import { assertOutsideTransaction, guardedDialect, inTransactionScope } from './transaction-scope.js';
import type { Dialect, Schema } from './schema.js';

export type Db = Kysely<Schema>;

/** The writer checkpoints for itself only past this WAL size (about 40 MB at 4 KiB pages): see checkpointer.ts. */
const WAL_BACKSTOP_PAGES = 10_000;
/**
 * A WAL file larger than this is cut back once the writes pause (checkpointer.ts): a burst otherwise
 * leaves the file at its largest for good.
 */
export const WAL_REST_BYTES = 4 * 2 ** 20;
/** The WAL's share of a storage budget, which sets it aside for the WAL file beside the database (db/usage.ts). */
const WAL_SHARE_OF_BUDGET = 0.1;
/** SQLite's WAL file format: a header, then a frame per page written, each with a header of its own. */
const WAL_HEADER_BYTES = 32;
const WAL_FRAME_HEADER_BYTES = 24;
/** Below this the writer would checkpoint nearly every commit. */
const WAL_MIN_PAGES = 16;

/**
 * The WAL pages after which the writer checkpoints for itself, the WAL file's size at that limit, and
 * its size at rest: with a storage budget, a tenth of it at most, so that the database and its WAL
 * together stay within the budget.
 */
export function walLimits(storageBudgetMb: number, pageSize: number): { autocheckpointPages: number; limitBytes: number; restBytes: number } {
  const shareBytes = storageBudgetMb * 2 ** 20 * WAL_SHARE_OF_BUDGET;
  const autocheckpointPages =
    storageBudgetMb <= 0 ? WAL_BACKSTOP_PAGES : Math.max(WAL_MIN_PAGES, Math.min(WAL_BACKSTOP_PAGES, Math.floor(shareBytes / pageSize)));
  const limitBytes = WAL_HEADER_BYTES + autocheckpointPages * (WAL_FRAME_HEADER_BYTES + pageSize);
  return { autocheckpointPages, limitBytes, restBytes: Math.min(WAL_REST_BYTES, limitBytes) };
}

/** pg, loaded only for PostgreSQL: a SQLite start-up does not pay for importing it. */
export async function loadPg(): Promise<typeof pg> {
  const { default: pg } = await import('pg');
  // PostgreSQL returns int8 (bigserial ids, counts) as strings by default; every value we keep fits a double.
  pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));
  return pg;
}

/** How much longer than the server's own statement timeout the client waits for an answer. */
const QUERY_TIMEOUT_MARGIN_MS = 1000;

/** node-postgres' error for a query past `query_timeout` (it sets no code). */
const QUERY_TIMEOUT_MESSAGE = 'Query read timeout';

/**
 * node-postgres' `query_timeout` rejects a query the server has not answered but leaves it on the
 * connection, and drops the ROLLBACK queued behind it, so the pool would hand the connection out
 * again inside the transaction that request was answered 503 for: the next request's COMMIT would
 * commit it. A connection whose query timed out is ended instead (the pool then replaces it), and
 * the server rolls its transaction back when it reads the end (a statement still running there was
 * cancelled by its `statement_timeout` a moment before).
 */
function endOnQueryTimeout(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  client.query = ((...args: unknown[]) => {
    const result = query(...args);
    if (result instanceof Promise)
      result.catch((error: Error) => {
        if (error.message === QUERY_TIMEOUT_MESSAGE) client.end().catch(() => {});
      });
    return result;
  }) as typeof client.query;
}

/** The SQLite database file in DATA_DIR. */
export const sqliteFile = (dataDir: string): string => path.join(dataDir, 'mothership.db');

/**
 * The one data layer: Kysely over SQLite (embedded default) or PostgreSQL.
 *
 * How to write (docs/architecture.md, "Writes"), one way per case:
 * - a change that announces an event: `EventLog.write` (the state and its event commit together);
 * - several statements that must commit together, with no event: `transaction`;
 * - one statement on its own: `write` (on SQLite it joins the group commit);
 * - `db` is for reads. A write through it would commit alone, outside the group commit
 *   (test/architecture.test.ts refuses one outside src/db/).
 */
/** How long a statement waits for another connection's lock before SQLITE_BUSY. */
const SQLITE_BUSY_TIMEOUT_MS = 5000;

/**
 * Puts the file in WAL mode. On a new file that several processes open at once (a CLI command beside
 * the server), another one can hold the lock the switch needs in a way SQLite does not wait for (its
 * deadlock rule skips the busy handler): the switch is tried again, for up to the busy timeout.
 */
async function switchToWal(file: BetterSqlite3.Database): Promise<void> {
  const deadline = Date.now() + SQLITE_BUSY_TIMEOUT_MS;
  for (;;) {
    try {
      file.pragma('journal_mode = WAL');
      return;
    } catch (error) {
      if ((error as { code?: string }).code !== 'SQLITE_BUSY' || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
}

export class Database {
  /** SQLite only: concurrent transactions share one commit. */
  private readonly groupCommit: GroupCommit<Db> | null;
  /** SQLite only: the connection itself. */
  private readonly file: BetterSqlite3.Database | null;
  /** Whether writes fail for lack of disk (readiness). */
  private readonly writes = new WriteHealth();
  /** SQLite only: what `commitMark` reads (poll-gate.ts). */
  private readonly commits: BetterSqlite3.Statement | null;
  /** The schema before this process migrated it to SCHEMA_VERSION (null: an empty database); undefined when it was up to date. */
  private migratedFrom: string | null | undefined;

  private constructor(
    readonly db: Db,
    readonly dialect: Dialect,
    sqlite: { file: BetterSqlite3.Database } | null = null,
    /** SQLite only: the checkpointer thread, whose failures the composition logs and counts. */
    readonly checkpointer: Checkpointer | null = null,
    /** SQLite with a storage budget: the most the WAL takes (walLimits), which the budget sets aside for it. */
    readonly walReserveBytes = 0,
  ) {
    this.groupCommit = sqlite ? new GroupCommit(db, sqlite.file, (error, wrote) => this.writes.observe(error, wrote)) : null;
    this.file = sqlite?.file ?? null;
    this.commits = sqlite ? sqlite.file.prepare('select total_changes() + (select data_version from pragma_data_version)').pluck() : null;
  }

  /** A number that moves whenever any connection commits a change (SQLite); null on PostgreSQL, where other instances commit unseen (poll-gate.ts). */
  commitMark(): number | null {
    return this.commits ? (this.commits.get() as number) : null;
  }

  /**
   * `storageBudgetMb`: SQLite's WAL is kept within a share of it (walLimits). `databaseTimeoutMs`:
   * PostgreSQL's connection and query timeout (DATABASE_TIMEOUT_MS), without which a server that
   * stops answering (frozen, a network that drops packets) holds every request, and then every pooled
   * connection, for good.
   */
  static async open(options: { databaseUrl: string | null; dataDir: string; storageBudgetMb?: number; databaseTimeoutMs?: number }): Promise<Database> {
    if (options.databaseUrl) {
      const driver = await loadPg();
      // Migrations may take long (an index on a large log): on a connection of their own, without the timeout.
      const migrator = Database.postgres(driver, options.databaseUrl, { max: 1 });
      try {
        await migrator.migrate();
      } finally {
        await migrator.db.destroy();
      }
      const timeout = options.databaseTimeoutMs ?? 0;
      // The server cancels a statement past the timeout itself (a lock waited for, a slow plan): the
      // connection stays in step and nothing goes on waiting on the server. One that cannot answer
      // (frozen, packets dropped) cannot cancel either: a moment later the client gives up and ends
      // the connection (endOnQueryTimeout). A transaction whose instance stops sending (frozen, a
      // paused VM) is ended by the server, so the locks it holds do not stop every other instance.
      const database = Database.postgres(driver, options.databaseUrl, {
        max: 10,
        connectionTimeoutMillis: timeout,
        statement_timeout: timeout,
        idle_in_transaction_session_timeout: timeout,
        query_timeout: timeout && timeout + QUERY_TIMEOUT_MARGIN_MS,
      });
      database.migratedFrom = migrator.migratedFrom;
      return database;
    }
    const filename = sqliteFile(options.dataDir);
    // Owner-only, created so before SQLite opens it (its -wal and -shm files take the same mode);
    // an existing file from an older version is tightened too.
    closeSync(openSync(filename, 'a', 0o600));
    chmodSync(filename, 0o600);
    const file = new BetterSqlite3(filename);
    file.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
    await switchToWal(file);
    file.pragma('synchronous = NORMAL');
    const pageSize = file.pragma('page_size', { simple: true }) as number;
    const wal = walLimits(options.storageBudgetMb ?? 0, pageSize);
    file.pragma(`wal_autocheckpoint = ${wal.autocheckpointPages}`);
    // When the WAL starts over, the writer cuts the file back to its limit: only what a reader kept
    // it from starting over made it grow beyond (under sustained writes, the cut at the limit is one
    // commit's pages; cutting it to its size at rest there blocked the event loop each time). The
    // checkpointer thread takes it to nothing at rest.
    file.pragma(`journal_size_limit = ${wal.limitBytes}`);
    const checkpointer = startCheckpointer(filename, wal.restBytes);
    const database = new Database(
      new Kysely<Schema>({ dialect: guardedDialect(new SqliteDialect({ database: file })) }),
      'sqlite',
      { file },
      checkpointer,
      options.storageBudgetMb ? wal.limitBytes : 0,
    );
    await database.migrate();
    return database;
  }

  private static postgres(driver: typeof pg, connectionString: string, options: pg.PoolConfig): Database {
    const pool = new driver.Pool({ connectionString, ...options });
    // A connection the server terminates (restart, failover) emits 'error' on its client, idle or
    // checked out; unhandled, that would crash the process. The failing query rejects on its own and
    // the pool replaces the client.
    pool.on('error', () => {});
    pool.on('connect', (client) => {
      client.on('error', () => {});
      endOnQueryTimeout(client);
    });
    return new Database(new Kysely<Schema>({ dialect: guardedDialect(new PostgresDialect({ pool })) }), 'postgres');
  }

  private async migrate(): Promise<void> {
    if (this.dialect === 'postgres') return this.migrateNow();
    // Kysely's SQLite migrator takes no lock (it counts on one process): a standalone worker and
    // `serve` starting together on a new file both created the tables, and one ended on "table zones
    // already exists". In one write transaction, the second waits (busy_timeout), then finds the
    // schema up to date.
    await sql`begin immediate`.execute(this.db);
    try {
      await this.migrateNow();
      await sql`commit`.execute(this.db);
    } catch (error) {
      await sql`rollback`.execute(this.db).catch(() => undefined); // already ended by the failure itself
      throw error;
    }
  }

  private async migrateNow(): Promise<void> {
    const all = migrations(this.dialect);
    const applied = (await this.tableExists('kysely_migration'))
      ? (await sql<{ name: string }>`select name from kysely_migration order by name`.execute(this.db)).rows.map((row) => row.name)
      : [];
    const newest = applied.at(-1) ?? null;
    const refusal = unknownSchema(applied, KNOWN_MIGRATIONS, { version: VERSION, writer: newest && (await this.releaseOf(newest)) });
    if (refusal) throw refusal;
    const migrator = new Migrator({ db: this.db, provider: { getMigrations: async () => all } });
    const { error, results = [] } = await migrator.migrateToLatest();
    if (error) throw error;
    if (results.length === 0) return;
    this.migratedFrom = newest;
    await this.db
      .insertInto('schema_releases')
      .values({ schema: SCHEMA_VERSION, version: VERSION, migrated_at: now() })
      .onConflict((oc) => oc.column('schema').doNothing())
      .execute();
  }

  /** The one log line of a start that migrated the schema; null when it was up to date. */
  migrationReport(): string | null {
    if (this.migratedFrom === undefined) return null;
    return this.migratedFrom === null
      ? `database schema created at ${SCHEMA_VERSION}`
      : `database schema migrated from ${this.migratedFrom} to ${SCHEMA_VERSION}`;
  }

  /** The release that first migrated the database to `schema`, when it recorded itself (migration 013 on). */
  private async releaseOf(schema: string): Promise<string | null> {
    if (!(await this.tableExists('schema_releases'))) return null;
    return (await this.db.selectFrom('schema_releases').select('version').where('schema', '=', schema).executeTakeFirst())?.version ?? null;
  }

  private async tableExists(name: string): Promise<boolean> {
    const query =
      this.dialect === 'postgres'
        ? sql<{ found: unknown }>`select to_regclass(${name}) as found`
        : sql<{ found: unknown }>`select name as found from sqlite_master where type = 'table' and name = ${name}`;
    return (await query.execute(this.db)).rows[0]?.found != null;
  }

  /**
   * Runs `work` in one transaction. On SQLite, transactions requested together share one commit
   * (group commit, each in its own savepoint), which starts with BEGIN IMMEDIATE so that a second
   * process (a standalone worker) waits for the write lock up front instead of failing on a lock
   * upgrade. Inside `work`, only `trx` may be used: another query or transaction throws at once
   * (transaction-scope.ts).
   */
  transaction<T>(work: (trx: Db) => Promise<T>): Promise<T> {
    assertOutsideTransaction('database.transaction()');
    return this.groupCommit ? this.groupCommit.run(work) : this.observed(this.db.transaction().execute((trx) => inTransactionScope(() => work(trx))));
  }

  /**
   * A write that needs no transaction of its own (one statement). On SQLite it joins the group
   * commit rather than paying a commit of its own; on PostgreSQL it runs at once (autocommit).
   */
  write<T>(work: (db: Db) => Promise<T>): Promise<T> {
    assertOutsideTransaction('database.write()');
    return this.groupCommit ? this.groupCommit.run(work) : this.observed(work(this.db));
  }

  /** PostgreSQL: a write's outcome for `writeState` (SQLite's group commit reports each batch's). */
  private observed<T>(write: Promise<T>): Promise<T> {
    return write.then(
      (value) => {
        this.writes.observe();
        return value;
      },
      (error: unknown) => {
        this.writes.observe(error);
        throw error;
      },
    );
  }

  /**
   * "ok", or why the latest write failed for lack of disk or resources ("disk full") while no write
   * has succeeded since: readiness reports it.
   */
  writeState(): ReturnType<WriteHealth['state']> {
    return this.writes.state();
  }

  /**
   * SQLite: the connection when a statement may run on it at once: `handle` is the transaction
   * running now (its batch holds the connection), or the database itself while no transaction is
   * open (the statement then runs alone, as Kysely would run it, without Kysely's per-query
   * promises). Otherwise (PostgreSQL, or another transaction open) null: the query takes its turn
   * through Kysely.
   */
  directConnection(handle: Db): BetterSqlite3.Database | null {
    if (!this.file) return null;
    const free = this.groupCommit!.holds(handle) || (handle === this.db && !this.file.inTransaction);
    return free ? this.file : null;
  }

  /** Row lock for read-modify-write in a transaction. SQLite already holds the database write lock. */
  forUpdate<Q extends { forUpdate(): Q }>(query: Q): Q {
    return this.dialect === 'postgres' ? query.forUpdate() : query;
  }

  /** Shared row lock: the row cannot change or go while this transaction runs; other readers still share it. */
  forShare<Q extends { forShare(): Q }>(query: Q): Q {
    return this.dialect === 'postgres' ? query.forShare() : query;
  }

  async ping(): Promise<void> {
    await sql`select 1`.execute(this.db);
  }

  async close(): Promise<void> {
    await this.checkpointer?.stop();
    await this.db.destroy();
  }
}

export const now = (): string => new Date().toISOString();
