import type { ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import type { EventLog } from './log.js';
import { tailLog } from './tail.js';
import type { StoredEvent } from './types.js';

/**
 * Events another process appends (a standalone worker, another instance) are not announced on this
 * process's bus: the stream also looks at the log this often.
 */
const POLL_MS = 1000;
const KEEPALIVE_MS = 15_000;

const frame = (event: StoredEvent) => `id: ${event.seq}\nevent: ${event.payload.event_type}\ndata: ${event.json}\n\n`;

/**
 * Feeds one Server-Sent Events client: every event after `after` (or, without it, every event from
 * now on), in sequence order, each once, as `tailLog` reads them. A client that stops reading costs
 * its position and nothing else: no page is read until the socket has drained. Returns the function
 * that stops it (call it when the client goes).
 */
export function streamEvents(events: EventLog, out: ServerResponse, after: number | undefined, log: FastifyBaseLogger): () => void {
  const drained = () =>
    new Promise<void>((resolve) => {
      const done = () => {
        out.off('drain', done).off('close', done);
        resolve();
      };
      out.on('drain', done).on('close', done);
    });

  const stopTail = tailLog(events, {
    after,
    pollMs: POLL_MS,
    deliver: async (page) => {
      for (const event of page) out.write(frame(event));
      if (out.writableNeedDrain) await drained();
    },
    onError: (error) => {
      // The database is away: end the stream; the browser reconnects with Last-Event-ID and loses nothing.
      log.warn({ err: error }, 'event stream ended: reading the log failed');
      stop();
      out.end();
    },
  });
  const keepalive = setInterval(() => out.writableNeedDrain || out.write(': keepalive\n\n'), KEEPALIVE_MS);
  const stop = () => {
    clearInterval(keepalive);
    stopTail();
  };
  return stop;
}
