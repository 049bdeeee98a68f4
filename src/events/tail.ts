import type { EventLog } from './log.js';
import type { StoredEvent } from './types.js';

/** A page of the log: at most this many events, and this many bytes of payload beyond its first event (EventLog.page). */
export const PAGE = 500;
const PAGE_BYTES = 1024 * 1024;

/** Stops following; `catchUp()` resolves once every event committed before the call is delivered (or reading failed). */
export type Tail = (() => void) & { catchUp(): Promise<void> };

export interface TailOptions {
  /** Deliver the events after this sequence number; without it, those appended from now on. A position beyond the log's end (a restored database) starts at its end. */
  after?: number;
  /** Gets events in sequence order; nothing more is delivered until it has resolved (a slow reader is never sent more). */
  deliver: (events: StoredEvent[]) => void | Promise<void>;
  /** Reading the log failed; the next wake-up reads again from where it stopped, unless the caller stops. */
  onError: (error: Error) => void;
  /** How often to look for events another process appended (another instance, a standalone worker). */
  pollMs: number;
}

/**
 * Follows the event log as every process sharing its database appends to it: each event once, in
 * sequence order. Events this process appends come from its bus and are delivered as they are
 * while they continue the log from the position; anything else is read from the log: after a gap
 * (another process appended in between), every `pollMs` (events of other processes are not on
 * this bus), and when the reader fell behind. The order is the log's, which is the commit order
 * (EventLog.append): a committed event is never behind the position. Returns the function that
 * stops it, whose `catchUp` delivers every event committed so far.
 */
export function tailLog(events: EventLog, options: TailOptions): Tail {
  let position: number | null = null;
  let stopped = false;
  let busy = false;
  let again = false;
  /** Read the log before the next delivery: at the start, at a poll, after a gap or an overflow. */
  let read = true;
  /** This process's events since the last delivery, at most a page: a reader that falls behind reads the log instead. */
  let appended: StoredEvent[] = [];
  let appendedBytes = 0;

  /** The queued events that continue the log from the position (older ones were delivered already). */
  const continuing = (from: number): StoredEvent[] => {
    const next: StoredEvent[] = [];
    for (const event of appended) {
      if (event.seq <= from) continue;
      if (event.seq !== from + next.length + 1) {
        read = true; // a gap: another process appended in between
        break;
      }
      next.push(event);
    }
    appended = [];
    appendedBytes = 0;
    return next;
  };

  /** The loop under way: a call while it runs makes it go round once more, and resolves with it. */
  let running: Promise<void> = Promise.resolve();
  const run = (): Promise<void> => {
    if (busy) {
      again = true;
      return running;
    }
    busy = true;
    running = loop();
    return running;
  };
  const loop = async (): Promise<void> => {
    try {
      do {
        again = false;
        position ??= Math.min(options.after ?? Infinity, await events.lastSeq());
        const next = continuing(position);
        if (next.length > 0 && !stopped) {
          await options.deliver(next);
          position = next.at(-1)!.seq;
        }
        if (read) {
          read = false;
          const nextPage = () => events.page(position!, PAGE_BYTES, PAGE);
          for (let page = await nextPage(); page.length > 0 && !stopped; page = await nextPage()) {
            await options.deliver(page);
            position = page.at(-1)!.seq;
          }
        }
      } while ((again || appended.length > 0) && !stopped);
    } catch (error) {
      read = true;
      if (!stopped) options.onError(error as Error);
    } finally {
      busy = false;
    }
  };

  const unsubscribe = events.subscribe((event) => {
    if (appended.length < PAGE && appendedBytes < PAGE_BYTES) {
      appended.push(event);
      appendedBytes += event.json.length;
    } else read = true;
    void run();
  });
  const timer = setInterval(() => {
    read = true;
    void run();
  }, options.pollMs);
  void run();
  const stop = () => {
    stopped = true;
    clearInterval(timer);
    unsubscribe();
  };
  return Object.assign(stop, {
    catchUp: () => {
      read = true;
      return run();
    },
  });
}
