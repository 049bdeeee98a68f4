import type { FastifyBaseLogger } from 'fastify';
import { LRUCache } from 'lru-cache';
import { isUnavailable, storageFailure } from '../db/index.js';

/** Keys being counted at most; beyond that the least recently written is reported and forgotten. */
const COUNTED_KEYS = 10_000;
const THROTTLE_WINDOW_MS = 60_000;

type Level = 'info' | 'warn' | 'error';

interface Counted {
  level: Level;
  fields: Record<string, unknown>;
  message: string;
  more: number;
}

/**
 * Log lines that anyone can cause once per request: a refused credential (a bot signature, an admin
 * token), a backing service away while requests keep coming. The first line of a key (a client, or
 * the service that is away) and message is written at once; the same again within the window is
 * only counted, and the count is written when the window ends. A flood of such requests then writes
 * a line per key and message a minute instead of one per request, which would cost each request more
 * than answering it and could fill the disk. One per server: `app.throttledLog`.
 */
export class ThrottledLog {
  private readonly counting: LRUCache<string, Counted>;

  constructor(
    private readonly log: FastifyBaseLogger,
    windowMs = THROTTLE_WINDOW_MS,
  ) {
    this.counting = new LRUCache<string, Counted>({
      max: COUNTED_KEYS,
      ttl: windowMs,
      ttlAutopurge: true,
      dispose: (counted) => {
        if (counted.more > 0) this.log[counted.level]({ ...counted.fields, more: counted.more }, `${counted.message} (${counted.more} more since)`);
      },
    });
  }

  /**
   * Writes `message` with `log` (the request's logger), or counts it. `message` is one of a fixed
   * set (what varies, and what a caller chose, goes in `fields`): a message made from the caller's
   * input would be a new line each time.
   */
  write(log: FastifyBaseLogger, key: string, level: Level, fields: Record<string, unknown>, message: string): void {
    const entry = `${key}\n${message}`;
    const counted = this.counting.get(entry);
    if (counted) {
      counted.more++;
      return;
    }
    this.counting.set(entry, { level, fields, message, more: 0 });
    log[level](fields, message);
  }

  /**
   * Writes a database storage failure ("disk full") once a minute per reason, whichever request or
   * background task met it; false, writing nothing, for any other error.
   */
  storageFailure(log: FastifyBaseLogger, error: unknown): boolean {
    const reason = storageFailure(error);
    if (!reason) return false;
    this.write(log, 'storage', 'error', { err: error }, `database cannot write: ${reason}`);
    return true;
  }

  /**
   * `log` for background tasks (sweeps, the webhook dispatcher, the worker), which retry every second
   * or so and log each failure as `{ err }`: a storage failure goes through `storageFailure` instead,
   * and a backing service away (the database, Redis) is a line a window per task's message.
   */
  background(log: FastifyBaseLogger): FastifyBaseLogger {
    const divert =
      (level: 'warn' | 'error') =>
      (fields: unknown, ...rest: unknown[]): void => {
        const error = (fields as { err?: { code?: unknown; message?: string } } | null)?.err;
        if (this.storageFailure(log, error)) return;
        const [message] = rest;
        if (error && isUnavailable(error) && typeof message === 'string') this.write(log, 'unavailable', level, fields as Record<string, unknown>, message);
        else (log[level] as (...args: unknown[]) => void)(fields, ...rest);
      };
    return Object.assign(Object.create(log) as FastifyBaseLogger, { warn: divert('warn'), error: divert('error') });
  }

  /** Writes the counts still open (at shutdown). */
  flush(): void {
    this.counting.clear();
  }
}
