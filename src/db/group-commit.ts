import type BetterSqlite3 from 'better-sqlite3';
import type { Kysely } from 'kysely';
import { inTransactionScope } from './transaction-scope.js';

interface Pending<D> {
  work: (trx: D) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** Transactions per commit at most, so one batch never holds the write lock for long. */
const MAX_BATCH = 64;

/**
 * Group commit on SQLite's one connection. Transactions requested while a batch runs wait for the
 * next one; a batch runs them one after another between one BEGIN IMMEDIATE and one COMMIT, each in
 * its own savepoint, so a transaction that fails (a 404, a refused quota) rolls back only its own
 * writes. Each caller is answered after the commit, so an acknowledged write is durable. One commit
 * (one WAL append, shared pages written once) then serves the whole batch instead of one each.
 * Nothing waits for a batch to fill: a batch starts on the next turn of the event loop, with the
 * transactions requested until then (requests read from the sockets in the same turn).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any schema: the batch only runs transactions
export class GroupCommit<D extends Kysely<any>> {
  private queue: Pending<D>[] = [];
  private draining = false;
  /** The handle of the batch running now: it holds the connection. */
  private holder: D | null = null;
  /** Prepared once: `exec` parses its SQL on every call, several times per transaction here. */
  private readonly control: Record<'begin' | 'savepoint' | 'release' | 'commit', BetterSqlite3.Statement>;
  /** Rows this connection has changed since it opened: a batch that changed none wrote nothing. */
  private readonly totalChanges: BetterSqlite3.Statement<[], number>;

  constructor(
    private readonly db: D,
    private readonly file: BetterSqlite3.Database,
    /** Told each batch's outcome: undefined when it committed (and whether it changed a row), else the error that failed it. */
    private readonly observe: (error: unknown, wrote: boolean) => void = () => {},
  ) {
    this.control = {
      begin: file.prepare('begin immediate'),
      savepoint: file.prepare('savepoint work'),
      release: file.prepare('release work'),
      commit: file.prepare('commit'),
    };
    this.totalChanges = file.prepare<[], number>('select total_changes()').pluck();
  }

  run<T>(work: (trx: D) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ work, resolve: resolve as (value: unknown) => void, reject });
      if (this.draining) return;
      this.draining = true;
      // Start on the next turn of the event loop, so every request that arrived in this one joins.
      setImmediate(() => void this.drain());
    });
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length) {
        const batch = this.queue.splice(0, MAX_BATCH);
        const changesBefore = this.totalChanges.get();
        // Holding Kysely's connection keeps queries outside a transaction from landing in this one.
        await this.db
          .connection()
          .execute((trx) => this.runBatch(trx as D, batch))
          .then(
            () => this.observe(undefined, this.totalChanges.get() !== changesBefore),
            (error: unknown) => {
              this.observe(error, false);
              batch.forEach((item) => item.reject(error));
            },
          );
      }
    } finally {
      this.draining = false;
    }
  }

  /** Whether `handle` is the running batch's: its statements may run on the connection directly. */
  holds(handle: unknown): boolean {
    return handle !== null && handle === this.holder;
  }

  private async runBatch(trx: D, batch: Pending<D>[]): Promise<void> {
    this.holder = trx;
    try {
      await this.runInTransaction(trx, batch);
    } finally {
      this.holder = null;
    }
  }

  private async runInTransaction(trx: D, batch: Pending<D>[]): Promise<void> {
    this.control.begin.run();
    const outcomes: { item: Pending<D>; ok: boolean; value: unknown }[] = [];
    try {
      for (const item of batch) {
        this.control.savepoint.run();
        try {
          outcomes.push({ item, ok: true, value: await inTransactionScope(() => item.work(trx)) });
          this.control.release.run();
        } catch (error) {
          // An I/O error or a full disk can end the whole transaction: then the batch fails together.
          if (!this.file.inTransaction) throw error;
          this.file.exec('rollback to work; release work');
          outcomes.push({ item, ok: false, value: error });
        }
      }
      this.control.commit.run();
    } catch (error) {
      if (this.file.inTransaction) this.file.exec('rollback');
      throw error;
    }
    for (const { item, ok, value } of outcomes) (ok ? item.resolve : item.reject)(value);
  }
}
