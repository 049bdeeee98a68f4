import type { EventLog } from './log.js';
import { tailLog } from './tail.js';
import type { StoredEvent } from './types.js';

/** A reader that is up to date with the feed: offered every page the feed delivers, as it comes. */
export interface FeedMember {
  /** Must not wait: the feed goes on to the next member, and a member that cannot keep up leaves. */
  offer(events: StoredEvent[]): void;
}

/**
 * One follower of the event log per process, shared by every event stream: however many streams are
 * open, the log is read (and polled for other processes' events) once. Members get each page
 * synchronously, so the feed never waits for a slow one; a member that falls behind leaves, reads
 * its own pages from the log, and joins again once it has reached `position`.
 * The feed follows the log only while someone uses it (`acquire` / `release`).
 */
export class EventFeed {
  private readonly members = new Set<FeedMember>();
  private users = 0;
  private following: Promise<() => void> | null = null;
  /** Every event up to this sequence number has been offered to the members. */
  position = 0;

  constructor(
    private readonly events: EventLog,
    private readonly options: { pollMs: number; onError: (error: Error) => void },
  ) {}

  /** Starts following the log if nobody did; resolves once `position` is known. Pair with `release`. */
  async acquire(): Promise<void> {
    this.users++;
    const following = (this.following ??= this.follow());
    try {
      await following;
    } catch (error) {
      this.users--;
      if (this.following === following) this.following = null;
      throw error;
    }
  }

  release(): void {
    if (--this.users > 0 || !this.following) return;
    const following = this.following;
    this.following = null;
    void following.then(
      (stop) => stop(),
      () => {},
    );
  }

  private async follow(): Promise<() => void> {
    this.position = await this.events.lastSeq();
    return tailLog(this.events, {
      after: this.position,
      pollMs: this.options.pollMs,
      deliver: (page) => {
        for (const member of this.members) member.offer(page);
        this.position = page.at(-1)!.seq;
      },
      onError: this.options.onError,
    });
  }

  /** A member must have delivered every event up to `position` (or beyond: it skips what it has). */
  join(member: FeedMember): void {
    this.members.add(member);
  }

  leave(member: FeedMember): void {
    this.members.delete(member);
  }
}
