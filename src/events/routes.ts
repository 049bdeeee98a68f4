import type { FastifyInstance } from 'fastify';
import { eventPayloadSchema, sequenceCursor } from '../http/schemas.js';
import type { EventLog, StoredEvent } from './index.js';

const SSE_KEEPALIVE_MS = 15_000;

const historyQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    after: { ...sequenceCursor, default: 0, description: 'Return events with a sequence number above this one' },
    limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
    order: { type: 'string', enum: ['asc', 'desc'], default: 'asc', description: 'desc: newest first (the most recent `limit` events)' },
  },
} as const;

const sseFrame = (event: StoredEvent) => `id: ${event.seq}\nevent: ${event.payload.event_type}\ndata: ${event.json}\n\n`;

/** Reading the event log: paged history, and a Server-Sent Events stream that resumes from Last-Event-ID. */
export function eventRoutes(app: FastifyInstance, events: EventLog): void {
  app.get(
    '/api/events',
    {
      schema: {
        tags: ['events'],
        summary: 'Event history after a sequence number, oldest first (or newest first with order=desc)',
        querystring: historyQuery,
        response: {
          200: {
            type: 'object',
            properties: {
              events: { type: 'array', items: { type: 'object', properties: { seq: { type: 'integer' }, ...eventPayloadSchema.properties } } },
              last_seq: { type: 'integer' },
            },
          },
        },
      },
    },
    async (request) => {
      const { after, limit, order } = request.query as { after: number; limit: number; order: 'asc' | 'desc' };
      const page = await events.history(after, limit, order);
      const lastSeq = page.reduce((max, event) => Math.max(max, event.seq), after);
      return { events: page.map((event) => ({ seq: event.seq, ...event.payload })), last_seq: lastSeq };
    },
  );

  app.get(
    '/api/events/stream',
    {
      schema: {
        tags: ['events'],
        summary: 'Server-Sent Events: every new event (id = sequence number); resumes after Last-Event-ID or ?after=',
        querystring: { type: 'object', additionalProperties: false, properties: { after: sequenceCursor } },
      },
    },
    async (request, reply) => {
      // A Last-Event-ID the stream never sent (garbage, out of range) is ignored: the stream starts live.
      const lastEventId = Number(request.headers['last-event-id']);
      const query = request.query as { after?: number };
      const resumeAfter = query.after ?? (Number.isSafeInteger(lastEventId) && lastEventId >= 0 ? lastEventId : undefined);
      // HEAD (Fastify answers it with this handler) gets the stream's headers and no body.
      if (request.method === 'HEAD') return reply.header('cache-control', 'no-store').type('text/event-stream').send();

      reply.hijack();
      const out = reply.raw;
      out.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive', 'x-accel-buffering': 'no' });
      out.write(': connected\n\n');

      // Subscribe before reading history so nothing falls between the two; `sent` drops the overlap.
      let sent = resumeAfter ?? 0;
      const backlog: StoredEvent[] = [];
      let replaying = resumeAfter !== undefined;
      const send = (event: StoredEvent) => {
        if (event.seq <= sent) return;
        sent = event.seq;
        out.write(sseFrame(event));
      };
      const unsubscribe = events.subscribe((event) => (replaying ? backlog.push(event) : send(event)));
      const keepalive = setInterval(() => out.write(': keepalive\n\n'), SSE_KEEPALIVE_MS);
      request.raw.on('close', () => {
        clearInterval(keepalive);
        unsubscribe();
      });

      if (resumeAfter !== undefined) {
        for (let page = await events.history(resumeAfter, 500); page.length > 0; page = await events.history(sent, 500)) {
          page.forEach(send);
        }
        replaying = false;
        backlog.forEach(send);
      }
    },
  );
}
