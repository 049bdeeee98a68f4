import type { ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import type { EventFeed, FeedMember } from './feed.js';
import type { EventLog } from './log.js';
import { PAGE } from './tail.js';
import type { StoredEvent } from './types.js';

const KEEPALIVE_MS = 15_000;

/** Each event's frame is encoded once and the same bytes are queued on every stream that sends it. */
const frames = new WeakMap<StoredEvent, Buffer>();
function frame(event: StoredEvent): Buffer {
  let bytes = frames.get(event);
  if (!bytes) {
    bytes = Buffer.from(`id: ${event.seq}\nevent: ${event.payload.event_type}\ndata: ${event.json}\n\n`);
    frames.set(event, bytes);
  }
  return bytes;
}

/** Resolves when `out` has taken what was queued, or closed. */
const drained = (out: ServerResponse) =>
  new Promise<void>((resolve) => {
    const done = () => {
      out.off('drain', done).off('close', done);
      resolve();
    };
    out.on('drain', done).on('close', done);
  });

/**
 * Feeds one Server-Sent Events client every event after its position, in sequence order, each once.
 * Bytes queued for the client stay within `budget` (plus at most one event): while it keeps up it is
 * a member of the shared feed; once its socket holds `budget` it leaves, waits for the socket to
 * drain, reads its own pages from the log (each no larger than the room left in the budget) and joins
 * again when it has reached the feed. A client that stops reading costs its position and the budget.
 */
export class EventStream implements FeedMember {
  private out: ServerResponse | null = null;
  private keepalive: NodeJS.Timeout | undefined;
  private stopped = false;

  private constructor(
    private readonly feed: EventFeed,
    private readonly events: EventLog,
    private position: number,
    private readonly budget: number,
    private readonly log: FastifyBaseLogger,
  ) {}

  /**
   * After `after` (or, without it, from now on; a position beyond the log's end starts at its end).
   * Reads the database before anything is sent, so a database that is away is an answer (503).
   */
  static async open(feed: EventFeed, events: EventLog, after: number | undefined, options: { budget: number; log: FastifyBaseLogger }): Promise<EventStream> {
    await feed.acquire();
    try {
      const position = Math.min(after ?? Infinity, await events.lastSeq());
      return new EventStream(feed, events, position, options.budget, options.log);
    } catch (error) {
      feed.release();
      throw error;
    }
  }

  /** Starts sending to `out` (its headers written). */
  pipe(out: ServerResponse): void {
    this.out = out;
    this.keepalive = setInterval(() => out.writableNeedDrain || out.write(': keepalive\n\n'), KEEPALIVE_MS);
    void this.catchUp();
  }

  /** Stops sending (the client went, or the server closes); the caller ends the response. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.keepalive);
    this.feed.leave(this);
    this.feed.release();
  }

  offer(page: StoredEvent[]): void {
    const out = this.out!;
    for (const event of page) {
      if (event.seq <= this.position) continue;
      if (out.writableLength >= this.budget) {
        this.feed.leave(this);
        void this.catchUp();
        return;
      }
      out.write(frame(event));
      this.position = event.seq;
    }
  }

  /** Sends from the log until the stream has reached the feed, then joins it. */
  private async catchUp(): Promise<void> {
    const out = this.out!;
    try {
      while (!this.stopped && !out.destroyed) {
        if (out.writableLength >= this.budget) await drained(out);
        else if (this.position >= this.feed.position) {
          this.feed.join(this);
          return;
        } else {
          const page = await this.events.page(this.position, this.budget - out.writableLength, PAGE);
          if (this.stopped) return;
          for (const event of page) out.write(frame(event));
          // Nothing after the position: what the feed offered was pruned since (retention); the stream is at the end.
          this.position = page.at(-1)?.seq ?? this.feed.position;
        }
      }
    } catch (error) {
      // The database is away: end the stream; the browser reconnects with Last-Event-ID and loses nothing.
      this.log.warn({ err: error }, 'event stream ended: reading the log failed');
      this.stop();
      out.end();
    }
  }
}
