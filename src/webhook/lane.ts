/** What a lane does with the database and the network; the lane decides only when. */
export interface LaneWork<Row, Answer> {
  /** Claims up to `limit` due rows (nothing due: none). */
  claim(limit: number): Promise<Row[]>;
  /** One attempt; null when a shutdown cut it off (the row is put back, not recorded). */
  send(row: Row): Promise<Answer | null>;
  /** Records answered attempts, in one write. */
  record(answered: { row: Row; answer: Answer }[]): Promise<void>;
  /** Puts claimed rows back, not attempted or cut off, to be sent at once by whichever process comes next. */
  release(rows: Row[]): Promise<void>;
  /** A claim, an attempt or a record failed: its rows stay claimed until their deadline, then are sent again. */
  failed(error: unknown): void;
}

/**
 * One lane of the webhook dispatcher: at most `concurrency` attempts in flight, each slot taking the
 * next row as soon as it frees, so a receiver slow to answer one delivery holds up that slot only.
 * Rows are claimed at most `concurrency` at a time, when the claimed ones run out, and each gets a
 * slot at once while the lane has free ones: a claimed row waits for a slot at most one attempt. The
 * answers that came back meanwhile are recorded just before each claim, so the writes are two per
 * round of the slots rather than two per attempt; an answer waits for that at most one attempt more.
 * The claim deadline allows for all three.
 */
export class DispatchLane<Row, Answer> {
  private readonly claimed: Row[] = [];
  private claiming: Promise<number> | null = null;
  /** Slots waiting for the running claim: each takes one of its rows. */
  private waiting = 0;
  /** Rows may have come due since the running claim began: a slot it leaves empty-handed claims again. */
  private kicked = false;
  private readonly slots = new Set<Promise<void>>();
  /** Answered attempts, recorded with the next claim (or by the stop). */
  private readonly answered: { row: Row; answer: Answer }[] = [];
  private readonly cutOff: Row[] = [];
  private stopped = true;

  constructor(
    readonly concurrency: number,
    private readonly work: LaneWork<Row, Answer>,
  ) {}

  start(): void {
    this.stopped = false;
  }

  /** Rows may be due: a claim running looks again, else a slot is opened to claim them (more open as rows come). */
  kick(): void {
    if (this.stopped) return;
    this.kicked = true;
    if (!this.claiming && this.slots.size < this.concurrency) this.open();
  }

  private open(): void {
    const slot: Promise<void> = this.fill().finally(() => this.slots.delete(slot));
    this.slots.add(slot);
  }

  /** Takes no more rows; waits for the attempts in flight and their records, and puts back what was claimed but not sent. */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.slots);
    await this.recordAnswered();
    const back = [...this.claimed.splice(0), ...this.cutOff.splice(0)];
    if (back.length) await this.work.release(back).catch((error: unknown) => this.work.failed(error));
  }

  private async fill(): Promise<void> {
    for (let row = await this.take(); row !== undefined; row = await this.take()) {
      try {
        const answer = await this.work.send(row);
        if (answer === null) this.cutOff.push(row);
        else this.answered.push({ row, answer });
      } catch (error) {
        // Left claimed: sent again after its deadline.
        this.work.failed(error);
      }
    }
  }

  /** The next claimed row, claiming more when none is left; undefined when nothing is due (or the lane stops). */
  private async take(): Promise<Row | undefined> {
    while (!this.stopped) {
      const row = this.claimed.shift();
      if (row !== undefined) return row;
      if (!this.claiming) {
        this.kicked = false;
        this.claiming = this.recordAndClaim().finally(() => {
          this.claiming = null;
          // Rows announced during the claim get a free slot now, not when a busy one frees.
          if (this.kicked) this.kick();
        });
      }
      this.waiting++;
      const found = await this.claiming.finally(() => this.waiting--);
      // Answers that came back during the claim are recorded by one more round.
      if (!found && !this.kicked && !this.answered.length) return undefined;
    }
    return undefined;
  }

  /** Records the answers so far, then claims up to `concurrency` rows: a write of each per round of the slots, not per attempt. */
  private async recordAndClaim(): Promise<number> {
    await this.recordAnswered();
    try {
      const rows = await this.work.claim(this.concurrency);
      this.claimed.push(...rows);
      // Rows no waiting slot will take get slots of their own, while the lane has some free.
      for (let left = rows.length - this.waiting; left > 0 && this.slots.size < this.concurrency; left--) this.open();
      return rows.length;
    } catch (error) {
      this.work.failed(error);
      return 0;
    }
  }

  private async recordAnswered(): Promise<void> {
    if (this.answered.length) await this.work.record(this.answered.splice(0)).catch((error: unknown) => this.work.failed(error));
  }
}
