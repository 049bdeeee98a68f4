import type { EventLog } from './log.js';
import type { StoredEvent } from './types.js';

const PAGE = 500;

export interface TailOptions {
  /** Deliver the events after this sequence number; without it, those appended from now on. A position beyond the log's end (a restored database) starts at its end. */
  after?: number;
  /** Gets each page in sequence order; the next page is read once it has resolved (a slow reader is never sent more). */
  deliver: (page: StoredEvent[]) => void | Promise<void>;
  /** Reading the log failed; the next wake-up reads again from where it stopped, unless the caller stops. */
  onError: (error: Error) => void;
  /** How often to look for events another process appended (another instance, a standalone worker). */
  pollMs: number;
}

/**
 * Follows the event log as every process sharing its database appends to it: each event once, in
 * sequence order. It reads pages from the log rather than taking events from the bus, which only
 * says that this process appended something; events of other processes are found by looking every
 * `pollMs`. The order is the log's, which is the commit order (EventLog.append): a committed event
 * is never behind the position. Returns the function that stops it.
 */
export function tailLog(events: EventLog, options: TailOptions): () => void {
  let position: number | null = null;
  let stopped = false;
  let pulling = false;
  let pullAgain = false;

  const pull = async (): Promise<void> => {
    if (pulling) {
      pullAgain = true;
      return;
    }
    pulling = true;
    try {
      do {
        pullAgain = false;
        position ??= Math.min(options.after ?? Infinity, await events.lastSeq());
        for (let page = await events.history(position, PAGE); page.length > 0 && !stopped; page = await events.history(position, PAGE)) {
          await options.deliver(page);
          position = page.at(-1)!.seq;
        }
      } while (pullAgain && !stopped);
    } catch (error) {
      if (!stopped) options.onError(error as Error);
    } finally {
      pulling = false;
    }
  };

  const unsubscribe = events.subscribe(() => void pull());
  const timer = setInterval(() => void pull(), options.pollMs);
  void pull(); // the position, and what was appended before the first wake-up
  return () => {
    stopped = true;
    clearInterval(timer);
    unsubscribe();
  };
}
