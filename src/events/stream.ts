import type { ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import type { EventLog } from './log.js';
import type { StoredEvent } from './types.js';

const PAGE = 500;
/**
 * Events another process appends (a standalone worker, another instance) are not announced on this
 * process's bus: the stream also looks at the log this often.
 */
const POLL_MS = 1000;
const KEEPALIVE_MS = 15_000;

const frame = (event: StoredEvent) => `id: ${event.seq}\nevent: ${event.payload.event_type}\ndata: ${event.json}\n\n`;

/**
 * Feeds one Server-Sent Events client: every event after `after` (or, without it, every event from
 * now on), in sequence order, each once. The stream pulls pages from the log rather than holding
 * events pushed to it; the bus only says that something was appended. Two things follow: the order
 * is the log's, which is the commit order (EventLog.append), so a committed event is never behind
 * the position; and a client that stops reading costs its position and nothing else: no page is read
 * until the socket has drained. Returns the function that stops it (call it when the client goes).
 */
export function streamEvents(events: EventLog, out: ServerResponse, after: number | undefined, log: FastifyBaseLogger): () => void {
  let position = 0;
  let stopped = false;
  let pulling = false;
  let pullAgain = false;
  const timers: NodeJS.Timeout[] = [];
  let unsubscribe = () => {};

  const drained = () =>
    new Promise<void>((resolve) => {
      const done = () => {
        out.off('drain', done).off('close', done);
        resolve();
      };
      out.on('drain', done).on('close', done);
    });

  const pull = async (): Promise<void> => {
    if (pulling) {
      pullAgain = true;
      return;
    }
    pulling = true;
    try {
      do {
        pullAgain = false;
        for (let page = await events.history(position, PAGE); page.length > 0 && !stopped; page = await events.history(position, PAGE)) {
          for (const event of page) out.write(frame(event));
          position = page.at(-1)!.seq;
          if (out.writableNeedDrain) await drained();
        }
      } while (pullAgain && !stopped);
    } catch (error) {
      // The database is away: end the stream; the browser reconnects with Last-Event-ID and loses nothing.
      log.warn({ err: error }, 'event stream ended: reading the log failed');
      out.end();
    } finally {
      pulling = false;
    }
  };

  const stop = () => {
    stopped = true;
    timers.forEach(clearInterval);
    unsubscribe();
  };

  void (async () => {
    try {
      // A position beyond the log's end was never sent by this log (a restored database): start at its end.
      position = Math.min(after ?? Infinity, await events.lastSeq());
    } catch (error) {
      log.warn({ err: error }, 'event stream ended: reading the log failed');
      out.end();
      return;
    }
    if (stopped) return;
    unsubscribe = events.subscribe(() => void pull());
    timers.push(
      setInterval(() => void pull(), POLL_MS),
      setInterval(() => out.writableNeedDrain || out.write(': keepalive\n\n'), KEEPALIVE_MS),
    );
    await pull(); // also picks up what was appended between reading the position and subscribing
  })();
  return stop;
}
