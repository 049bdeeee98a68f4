import type { FastifyRequest } from 'fastify';
import type { ServerResponse } from 'node:http';
import { pollEvery, type Poller } from '../ticks.js';

/**
 * The event streams an instance has open. A stream never ends on its own, and the server's close waits
 * for every open connection, so `endAll` ends them first (browsers reconnect with Last-Event-ID to
 * whichever instance serves next). While any is open, each one's credential is checked again every
 * `recheckMs` and a stream it no longer admits is ended; with none open, nothing wakes.
 */
export class OpenStreams {
  private readonly streams = new Map<() => void, { out: ServerResponse; request: FastifyRequest }>();
  private recheck: Poller | null = null;

  constructor(private readonly recheckMs: number) {}

  /** Keeps `out` (the stream `request` opened) until it closes; `release` gives back what the stream holds. */
  add(out: ServerResponse, request: FastifyRequest, release: () => void): void {
    let open = true;
    const close = () => {
      if (!open) return;
      open = false;
      release();
      this.streams.delete(end);
      if (this.streams.size === 0) {
        void this.recheck?.stop();
        this.recheck = null;
      }
    };
    const end = () => {
      close();
      out.end();
    };
    this.streams.set(end, { out, request });
    this.recheck ??= pollEvery(this.recheckMs, () => this.recheckCredentials());
    out.on('close', close);
  }

  endAll(): void {
    for (const end of this.streams.keys()) end();
  }

  get size(): number {
    return this.streams.size;
  }

  /** Bytes written to the streams and not yet taken by their clients. */
  bufferedBytes(): number {
    let bytes = 0;
    for (const { out } of this.streams.values()) bytes += out.writableLength;
    return bytes;
  }

  private async recheckCredentials(): Promise<void> {
    for (const [end, { request }] of this.streams) {
      // A database that is away ends no stream here: the stream's own read ends it, and the browser comes back.
      if (!(await request.stillAdmitted().catch(() => true))) end();
    }
  }
}
