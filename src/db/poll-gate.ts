/** Where a process learns that something committed: on SQLite a number that moves with every commit, on PostgreSQL nothing (null). */
export interface CommitMark {
  commitMark(): number | null;
}

/**
 * Lets a poll skip its queries while they could only find what they found last time: nothing was
 * committed since (SQLite: `data_version` moves with other connections' commits, `total_changes()`
 * with this one's) and nothing comes due by the clock (`quietUntil`). On PostgreSQL other instances
 * commit unseen, so every poll runs. A poll that never calls `quietUntil` runs at every tick.
 */
export class PollGate {
  private mark: number | null = null;
  private dueAt = 0;
  /** Polls run so far: an answer read before a later poll ran is stale (ticks of a slow sweep overlap). */
  private runs = 0;

  constructor(private readonly database: CommitMark) {}

  /** Whether the poll must run now. Read before the poll's queries: a commit during them makes the next tick run. */
  due(nowMs = Date.now()): boolean {
    const mark = this.database.commitMark();
    if (mark !== null && mark === this.mark && nowMs < this.dueAt) return false;
    this.mark = mark;
    this.dueAt = 0;
    this.runs++;
    return true;
  }

  /** The poll ran and nothing is due before `atMs` (Infinity: nothing until the next commit). */
  quietUntil(atMs: number): void {
    this.dueAt = atMs;
  }

  /**
   * The same with the moment read by `nextDue`, which is not run where every poll runs anyway
   * (PostgreSQL). Dropped when another poll ran meanwhile: it may have read before a commit that
   * poll saw, and would silence what that poll found due.
   */
  async quietUntilNext(nextDue: () => Promise<number>): Promise<void> {
    if (this.mark === null) return;
    const runs = this.runs;
    const at = await nextDue();
    if (runs === this.runs) this.dueAt = at;
  }
}
