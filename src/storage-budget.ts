import type { FastifyBaseLogger } from 'fastify';
import {
  type Database,
  type Db,
  DELIVERY_ROW_OVERHEAD,
  deletionMark,
  type LogTable,
  outsideTransaction,
  PollGate,
  pruneOldest,
  reclaim,
  storageBytes,
  storedRowBytes,
} from './db/index.js';
import { type AfterAppend, type AppendHook, SAFETY_EVENTS, type SerializedEvent, type Writer } from './events/index.js';
import type { ThrottledLog } from './http/index.js';
import { DomainError } from './errors.js';
import { onEvery } from './ticks.js';

/** How often the keeper measures the database (and at once when this process's writes near the budget). */
const BUDGET_CHECK_MS = 1000;
/** Rows deleted per statement when over budget: small, so the keeper stops close to its target. */
const BUDGET_CHUNK = 100;
/** A writer's recent bytes count half after this long: its share is what it asked for in the last tens of seconds. */
const SHARE_HALF_LIFE_MS = 10_000;
/**
 * PostgreSQL: a give-back still waiting after this long waits on a long transaction (a backup), not on
 * appends in flight (StorageBudget.used).
 */
export const GIVE_BACK_HELD_MS = 3 * BUDGET_CHECK_MS;
/** The most passes whose deletions wait with marks of their own; later ones share the newest's. */
const MAX_UNRECLAIMED = 8;

/**
 * The storage budget's levels (docs/operations.md): above `high` the keeper deletes the oldest rows
 * down to `low`; from `share` a writer that asked for more than its fair share lately is refused
 * (WriterShares), so that the others still write in the headroom up to `refuse`, where every event
 * is refused until the keeper has made room. The top 5 % absorbs what the check cannot see: on
 * PostgreSQL other processes' writes not yet committed.
 */
export const budgetLevels = (budgetBytes: number) => ({
  high: budgetBytes * 0.85,
  low: budgetBytes * 0.75,
  share: budgetBytes * 0.9,
  refuse: budgetBytes * 0.95,
});

/** What an appended event adds at most: its row and its delivery's copy, each as PostgreSQL stores it. */
export const appendedBytes = (events: SerializedEvent[]): number =>
  events.reduce((total, event) => {
    const bytes = Buffer.byteLength(event.json);
    return total + storedRowBytes(bytes) + storedRowBytes(bytes, DELIVERY_ROW_OVERHEAD);
  }, 0);

/**
 * What each writer (a token, an address, the service itself: `EventLog.write`) asked to append lately,
 * accepted or refused, fading by half every SHARE_HALF_LIFE_MS. A writer's fair share is the mean of
 * the recent writers': a writer that floods is above it however many tokens it spreads over, one
 * writing alone never is, and one refused that keeps asking stays above it.
 */
export class WriterShares {
  private readonly writers = new Map<string, { bytes: number; at: number }>();
  private total = 0;
  private totalAt = 0;

  constructor(private readonly halfLifeMs = SHARE_HALF_LIFE_MS) {}

  /** Whether `writer`'s recent bytes are above the fair share, without counting anything. */
  above(writer: string, now = Date.now()): boolean {
    const entry = this.writers.get(writer);
    if (!entry || this.writers.size < 2) return false;
    return this.faded(entry.bytes, now - entry.at) > this.faded(this.total, now - this.totalAt) / this.writers.size;
  }

  /** Counts `bytes` asked for by `writer`; answers whether its recent bytes are now above the fair share. */
  record(writer: string, bytes: number, now = Date.now()): boolean {
    const entry = this.writers.get(writer) ?? { bytes: 0, at: now };
    entry.bytes = this.faded(entry.bytes, now - entry.at) + bytes;
    entry.at = now;
    this.writers.set(writer, entry);
    this.total = this.faded(this.total, now - this.totalAt) + bytes;
    this.totalAt = now;
    return this.above(writer, now);
  }

  /** Drops the writers whose bytes have faded to nothing: only recent writers are kept and count in the mean. */
  forget(now = Date.now()): void {
    for (const [writer, entry] of this.writers) if (this.faded(entry.bytes, now - entry.at) < 1) this.writers.delete(writer);
  }

  private faded(bytes: number, elapsedMs: number): number {
    return bytes * 2 ** (-elapsedMs / this.halfLifeMs);
  }
}

/**
 * Keeps the event log and the webhook delivery log within STORAGE_BUDGET_MB: oldest rows first across
 * both logs (`logs`: the events, and the delivery attempts that are finished; a pending or in-flight
 * delivery is not deleted, and carries its own copy of its event). Should pending deliveries alone
 * fill the budget, `makeRoom` abandons the oldest, which are then deleted: a receiver that is down
 * never has events refused for good. As an append hook it refuses events near the budget
 * (budgetLevels): from `share` those of a writer above its fair share, except falls (SAFETY_EVENTS),
 * which no other writer's bulk may keep out; from `refuse` every event, so no writer can grow the
 * database past the budget between two measurements. What it checks, with each event's delivery
 * copy: on SQLite the database measured inside the appending transaction after the rows are written
 * (the pages they take, however SQLite lays them out; a rollback frees them); on PostgreSQL, before
 * the rows are written (a refused row would take its space until a VACUUM), the last measurement plus
 * what this process appended since (the triggers of migrations 016, 023 and 025 count the same bytes
 * as `appendedBytes`), plus what the keeper deleted but PostgreSQL cannot reuse yet.
 */
export class StorageBudget implements AppendHook {
  private measured = 0;
  private appendedSince = 0;
  /**
   * PostgreSQL: what appends were checked for and have not written yet (they wait for the append
   * lock): counted as used, but out of a measurement's reach until written, which would drop them.
   */
  private inFlight = 0;
  /**
   * What passes deleted and `reclaim` has not given back yet (PostgreSQL), counted as used until then:
   * each pass's with its own mark (null until taken), given back once no transaction older than it is
   * left; `since`: when that pass deleted first.
   */
  private unreclaimed: { bytes: number; mark: bigint | null; since: number }[] = [];
  private stopTimer: (() => void) | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private readonly levels: ReturnType<typeof budgetLevels>;
  private readonly shares = new WriterShares();
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

  /** The bytes in use: the rows, plus what passes deleted but have not given back (`heldBack`, or all of it). */
  get used(): number {
    return this.rows + (this.heldBack() ?? this.unreclaimedBytes);
  }

  /**
   * What the keeper deletes for: the rows, plus `heldBack`. Not what waits on appends in flight: the
   * next give-back frees it, and deleting cannot.
   */
  private get kept(): number {
    return this.rows + (this.heldBack() ?? 0);
  }

  /** The rows at the last measurement, plus what this process appended since or is appending. */
  private get rows(): number {
    return this.measured + this.appendedSince + this.inFlight;
  }

  /**
   * While a long transaction holds the give-back (GIVE_BACK_HELD_MS), PostgreSQL can reuse nothing
   * until it ends, and counting all that waits would refuse every event meanwhile: then one pass's
   * worth (high - low) counts, and the keeper deletes for it. Null while no long transaction holds it.
   */
  private heldBack(): number | null {
    const since = this.unreclaimed[0]?.since;
    return since !== undefined && Date.now() - since > GIVE_BACK_HELD_MS ? Math.min(this.unreclaimedBytes, this.levels.high - this.levels.low) : null;
  }

  private get unreclaimedBytes(): number {
    return this.unreclaimed.reduce((total, deleted) => total + deleted.bytes, 0);
  }

  /**
   * Refuses before the transaction what `prepare` would refuse as of the last check: a flooder's
   * refusals then cost no write (on SQLite they held the one writer). Not counted in its share, which
   * fades no faster than the others'.
   */
  admit(writer: Writer): void {
    const used = this.used;
    if (used > this.levels.refuse || (!writer.safety && used > this.levels.share && this.shares.above(writer.client))) throw this.refusal(used);
  }

  /** The check: on PostgreSQL before the rows are written; on SQLite once they are, measuring the database with them. */
  async prepare(trx: Db, events: SerializedEvent[], writer: string): Promise<AfterAppend | undefined> {
    const bytes = appendedBytes(events);
    if (this.database.dialect === 'sqlite')
      return {
        written: async () => {
          const used = await storageBytes(this.database, trx);
          this.refuseAbove(used, events, bytes, writer);
          this.measured = used;
          if (this.used > this.levels.high) this.kick();
        },
      };
    this.refuseAbove(this.used + bytes, events, bytes, writer);
    this.inFlight += bytes;
    if (this.used > this.levels.high) this.kick();
    let pending = bytes;
    const settle = (written: boolean) => {
      this.inFlight -= pending;
      if (written) this.appendedSince += pending;
      pending = 0;
    };
    return { written: async () => settle(true), abandoned: () => settle(false) };
  }

  /** Refuses the append of `events` (`bytes`, counted in `writer`'s share) when the logs would take `used`. */
  private refuseAbove(used: number, events: SerializedEvent[], bytes: number, writer: string): void {
    const aboveShare = this.shares.record(writer, bytes) && !events.some((event) => SAFETY_EVENTS.includes(event.payload.event_type));
    if (used > this.levels.refuse || (aboveShare && used > this.levels.share)) throw this.refusal(used);
  }

  /**
   * Counts rows written beside the appends (a webhook retry's or redelivery's copy of its event): they
   * are never refused, as their event was accepted, but the next appends see them at once and the
   * keeper starts when they bring the logs over `high`.
   */
  stored(payloads: string[]): void {
    this.appendedSince += payloads.reduce((total, payload) => total + storedRowBytes(Buffer.byteLength(payload), DELIVERY_ROW_OVERHEAD), 0);
    if (this.used > this.levels.high) this.kick();
  }

  private refusal(used: number): DomainError {
    this.kick();
    const why =
      used > this.levels.refuse
        ? 'is at its storage budget (STORAGE_BUDGET_MB)'
        : 'is near its storage budget (STORAGE_BUDGET_MB) and this client wrote more than its share of it lately';
    return new DomainError('storage_full', `The event log ${why}; its oldest rows are being deleted, retry shortly`, { retryAfterSeconds: 1 });
  }

  /** `log`, `throttledLog`: the server's, which exist only after the event pipeline this budget guards. */
  async start(log: FastifyBaseLogger, throttledLog: ThrottledLog): Promise<void> {
    this.log = log;
    this.throttledLog = throttledLog;
    await this.measure();
    this.stopTimer = onEvery(BUDGET_CHECK_MS, () => {
      this.shares.forget();
      if (this.gate.due() || this.unreclaimed.length > 0) this.kick();
    });
    this.kick();
  }

  async stop(): Promise<void> {
    this.stopTimer?.();
    this.stopTimer = null;
    await this.running;
  }

  /** Runs the keeper unless it runs; a run in progress runs once more. */
  kick(): void {
    if (!this.stopTimer) return;
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

  /**
   * One pass: gives back what earlier passes deleted once no transaction can see it (`reclaim`); then,
   * with `kept` over `high`, deletes the oldest rows chunk by chunk until under `low` or nothing
   * deletable is left.
   */
  async keep(): Promise<number> {
    await this.markDeletions();
    const clear = this.unreclaimed.length > 0 ? await this.reclaim() : null;
    if (clear !== null) this.unreclaimed = this.unreclaimed.filter((deleted) => deleted.mark! > clear);
    await this.measure();
    let kept = this.kept;
    if (kept <= this.levels.high) return 0;
    let deleted = 0;
    try {
      while (kept > this.levels.low) {
        const pruned = await pruneOldest(this.database, this.logs, BUDGET_CHUNK);
        const chunk = pruned.rows || (await this.makeRoom(BUDGET_CHUNK));
        if (chunk === 0) break;
        deleted += chunk;
        // Counted at once: appends admitted during the pass must not take what is not given back.
        if (pruned.bytes > 0) this.countDeleted(pruned.bytes);
        await this.measure();
        kept = this.kept;
      }
    } finally {
      await this.markDeletions();
    }
    const at = { deleted, usedBytes: this.used, budgetBytes: this.budgetBytes };
    // Every refused append starts a pass: while pending deliveries fill the budget, a line a minute.
    if (kept > this.levels.high)
      this.throttledLog?.write(this.log!, 'storage-budget', 'warn', at, 'storage budget: still over after deleting every event and delivery it may delete');
    else this.log?.info(at, 'storage budget: oldest rows deleted');
    return deleted;
  }

  /**
   * This pass's deletions, unmarked until it ends. Beyond MAX_UNRECLAIMED passes waiting (a long
   * transaction holds every give-back), the newest pass's join this one's, to wait for its later mark.
   */
  private countDeleted(bytes: number): void {
    const last = this.unreclaimed.at(-1);
    if (last && (last.mark === null || this.unreclaimed.length >= MAX_UNRECLAIMED)) {
      last.bytes += bytes;
      last.mark = null;
    } else this.unreclaimed.push({ bytes, mark: null, since: Date.now() });
  }

  /** Marks what this pass deleted (`deletionMark`, after the deletes; again at the next pass should it fail). */
  private async markDeletions(): Promise<void> {
    const unmarked = this.unreclaimed.filter((deleted) => deleted.mark === null);
    if (unmarked.length === 0) return;
    const mark = (await deletionMark(this.database)) ?? 0n;
    for (const deleted of unmarked) deleted.mark = mark;
  }

  /**
   * `reclaim`, null when it fails (its VACUUM past DATABASE_TIMEOUT_MS on a large log): the reserve
   * stays counted, and the pass still deletes, which a thrown error would skip for as long as it fails.
   */
  private async reclaim(): Promise<bigint | null> {
    try {
      return await reclaim(
        this.database,
        this.logs,
        this.unreclaimed.map((deleted) => deleted.mark!),
      );
    } catch (error) {
      this.throttledLog?.write(this.log!, 'storage-budget-reclaim', 'warn', { err: error }, 'storage budget: giving back deleted rows failed');
      return null;
    }
  }

  private async measure(): Promise<number> {
    const appended = this.appendedSince;
    this.measured = await storageBytes(this.database);
    this.appendedSince -= appended;
    return this.measured;
  }
}
