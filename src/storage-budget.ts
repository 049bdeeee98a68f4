import type { FastifyBaseLogger } from 'fastify';
import { type Database, type Db, LOG_ROW_OVERHEAD, type LogTable, outsideTransaction, PollGate, pruneOldest, storageBytes } from './db/index.js';
import type { AppendHook, StoredEvent } from './events/index.js';
import type { ThrottledLog } from './http/index.js';
import { DomainError } from './errors.js';

/** How often the keeper measures the database (and at once when this process's writes near the budget). */
export const BUDGET_CHECK_MS = 1000;
/** Rows deleted per statement when over budget: small, so the keeper stops close to its target. */
const BUDGET_CHUNK = 100;

/**
 * The storage budget's levels (docs/operations.md): above `high` the keeper deletes the oldest rows
 * down to `low`; at `refuse` (this process's estimate: the last measurement plus what it appended
 * since) events are refused until it has. The top 5 % absorbs what the estimate misses: writes still
 * in flight when the database was measured, and on SQLite the pages' own overhead.
 */
export const budgetLevels = (budgetBytes: number) => ({ high: budgetBytes * 0.85, low: budgetBytes * 0.75, refuse: budgetBytes * 0.95 });

/** What an appended event adds at most: its row and its delivery's copy, each with the row's overhead. */
export const appendedBytes = (events: StoredEvent[]): number =>
  events.reduce((total, event) => total + 2 * (Buffer.byteLength(event.json) + LOG_ROW_OVERHEAD), 0);

/**
 * Keeps the event log and the webhook delivery log within STORAGE_BUDGET_MB: oldest rows first across
 * both logs (`logs`: the events, and the delivery attempts that are finished; a pending or in-flight
 * delivery is not deleted, and carries its own copy of its event). Should pending deliveries alone
 * fill the budget, `makeRoom` abandons the oldest, which are then deleted: a receiver that is down
 * never has events refused for good. As an append hook it refuses an
 * event while the database is at the budget (the last measurement plus what this process appended
 * since), so no writer can grow it past the budget between two measurements.
 */
export class StorageBudget implements AppendHook {
  private measured = 0;
  private appendedSince = 0;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private readonly levels: ReturnType<typeof budgetLevels>;
  private log: FastifyBaseLogger | null = null;
  private throttledLog: ThrottledLog | null = null;
  /** The database grows only with a commit: the periodic measurement waits for one. */
  private readonly gate: PollGate;

  constructor(
    private readonly database: Database,
    private readonly budgetBytes: number,
    private readonly logs: LogTable[],
    /** The last resort once nothing in `logs` is left to delete: frees up to `limit` rows for the next pass to delete (the outbox abandons pending deliveries). */
    private readonly makeRoom: (limit: number) => Promise<number> = async () => 0,
  ) {
    this.levels = budgetLevels(budgetBytes);
    this.gate = new PollGate(database);
  }

  /** The bytes in use at the last measurement, plus what this process appended since. */
  get used(): number {
    return this.measured + this.appendedSince;
  }

  async append(_trx: Db, events: StoredEvent[]): Promise<void> {
    const bytes = appendedBytes(events);
    if (this.used + bytes > this.levels.refuse) {
      this.kick();
      throw new DomainError('storage_full', 'The event log is at its storage budget (STORAGE_BUDGET_MB) and its oldest rows are being deleted; retry shortly', {
        retryAfterSeconds: 1,
      });
    }
    this.appendedSince += bytes;
    if (this.used > this.levels.high) this.kick();
  }

  /** `log`, `throttledLog`: the server's, which exist only after the event pipeline this budget guards. */
  async start(log: FastifyBaseLogger, throttledLog: ThrottledLog): Promise<void> {
    this.log = log;
    this.throttledLog = throttledLog;
    await this.measure();
    this.timer = setInterval(() => this.gate.due() && this.kick(), BUDGET_CHECK_MS).unref();
    this.kick();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  /** Runs the keeper unless it runs; a run in progress runs once more. */
  kick(): void {
    if (!this.timer) return;
    if (this.running) {
      this.again = true;
      return;
    }
    // `append` kicks from inside the appending transaction: the pass is not part of it.
    this.running = outsideTransaction(() => this.keep())
      .then(() => this.gate.quietUntil(Infinity))
      .catch((error: Error) => this.log?.warn({ err: error }, 'storage budget: pruning failed'))
      .finally(() => {
        this.running = null;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  /** One pass: over `high`, deletes the oldest rows chunk by chunk until under `low` or nothing deletable is left. */
  async keep(): Promise<number> {
    let used = await this.measure();
    if (used <= this.levels.high) return 0;
    let deleted = 0;
    while (used > this.levels.low) {
      const chunk = (await pruneOldest(this.database, this.logs, BUDGET_CHUNK)) || (await this.makeRoom(BUDGET_CHUNK));
      if (chunk === 0) break;
      deleted += chunk;
      used = await this.measure();
    }
    const at = { deleted, usedBytes: used, budgetBytes: this.budgetBytes };
    // Every refused append starts a pass: while pending deliveries fill the budget, a line a minute.
    if (used > this.levels.high)
      this.throttledLog?.write(this.log!, 'storage-budget', 'warn', at, 'storage budget: still over after deleting every event and delivery it may delete');
    else this.log?.info(at, 'storage budget: oldest rows deleted');
    return deleted;
  }

  private async measure(): Promise<number> {
    const appended = this.appendedSince;
    this.measured = await storageBytes(this.database);
    this.appendedSince -= appended;
    return this.measured;
  }
}
