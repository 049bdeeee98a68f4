import type { FastifyInstance } from 'fastify';
import { DomainError } from '../errors.js';
import type { OutgoingHttpHeaders } from 'node:http';
import type { Metrics } from '../ops/index.js';
import { eventPayloadSchema, pageLimit, perPage, requestClient, sequenceCursor, withSchemaTypes } from '../http/index.js';
import type { EventLog } from './log.js';
import { EVENT_TYPES } from './types.js';
import { EventFeed } from './feed.js';
import { StreamSlots } from './slots.js';
import { EventStream } from './stream.js';
import { OpenStreams } from './open-streams.js';
import { EVENT_PAGE } from '../limits.js';

/**
 * Events another process appends (a standalone worker, another instance) are not announced on this
 * process's bus: the shared feed also looks at the log this often.
 */
const POLL_MS = 1000;
/**
 * How often an open stream's credential is checked again: a revoked token's or ended session's
 * stream ends within this (on other instances, within this and the token cache's 5 s).
 */
export const STREAM_RECHECK_MS = 5000;
/** How long a client refused for a cap is told to wait: streams are long-lived, a slot frees when one closes. */
const RETRY_AFTER_SECONDS = 10;

/** EVENT_STREAMS_MAX, EVENT_STREAMS_PER_CLIENT, EVENT_STREAM_BUFFER_BYTES (docs/configuration.md). */
export interface StreamLimits {
  max: number;
  perClient: number;
  bufferBytes: number;
}

const historyQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    after: { ...sequenceCursor, default: 0, description: 'Return events with a sequence number above this one' },
    limit: pageLimit(EVENT_PAGE),
    order: { type: 'string', enum: ['asc', 'desc'], default: 'asc', description: 'desc: newest first (the most recent `limit` events)' },
    type: {
      type: 'array',
      items: { type: 'string', enum: EVENT_TYPES },
      maxItems: EVENT_TYPES.length,
      description: 'Only events of these types (repeat the parameter: ?type=fall.detected&type=fall.cleared)',
    },
  },
} as const;

/** Reading the event log: paged history, and a Server-Sent Events stream that resumes from Last-Event-ID. */
export function eventRoutes(server: FastifyInstance, events: EventLog, metrics: Metrics, limits: StreamLimits): void {
  const app = withSchemaTypes(server);
  const openStreams = new OpenStreams(STREAM_RECHECK_MS);
  const slots = new StreamSlots({ total: limits.max, perClient: limits.perClient });
  const feed = new EventFeed(events, {
    pollMs: POLL_MS,
    // The feed reads again at its next poll, from where it stopped: the streams wait and lose nothing.
    onError: (error) =>
      server.throttledLog.write(server.log, 'event-feed', 'warn', { err: error }, 'event streams: reading the event log failed; trying again'),
  });
  app.addHook('preClose', (done) => {
    openStreams.endAll();
    done();
  });
  metrics.gauge('mothership_event_streams', 'Open event streams (dashboards)', async () => openStreams.size);
  metrics.gauge('mothership_event_stream_buffered_bytes', 'Bytes written to event streams and not yet taken by their clients', async () =>
    openStreams.bufferedBytes(),
  );

  app.get(
    '/api/events',
    {
      config: { rateLimit: { scale: perPage(EVENT_PAGE) } },
      schema: {
        operationId: 'listEvents',
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
      const { after, limit, order, type } = request.query;
      const page = await events.history(after, limit, order, type);
      const lastSeq = page.reduce((max, event) => Math.max(max, event.seq), after);
      return { events: page.map((event) => ({ seq: event.seq, ...event.payload })), last_seq: lastSeq };
    },
  );

  app.get(
    '/api/events/stream',
    {
      config: { problems: ['too_many_streams'] },
      schema: {
        operationId: 'streamEvents',
        tags: ['events'],
        summary: 'Server-Sent Events: every new event (id = sequence number); resumes after Last-Event-ID or ?after=',
        querystring: { type: 'object', additionalProperties: false, properties: { after: sequenceCursor } },
        response: {
          200: {
            description: 'One message per event: `id: <seq>`, `event: <event_type>`, `data: <payload JSON>`; a comment every 25 s keeps the connection open',
            content: { 'text/event-stream': { schema: { type: 'string' } } },
          },
        },
      },
    },
    async (request, reply) => {
      // A Last-Event-ID the stream never sent (garbage, out of range) is ignored: the stream starts live.
      const header = request.headers['last-event-id'];
      const lastEventId = typeof header === 'string' && /^\d+$/.test(header) ? Number(header) : Number.NaN;
      const resumeAfter = request.query.after ?? (Number.isSafeInteger(lastEventId) && lastEventId >= 0 ? lastEventId : undefined);
      // HEAD (Fastify answers it with this handler) gets the stream's headers and no body.
      if (request.method === 'HEAD') return reply.header('cache-control', 'no-store').type('text/event-stream').send();

      // A client is its token (`token:<id>`) or, with the dashboard session, its address.
      const client = requestClient(request);
      const refusal = slots.take(client);
      if (refusal === 'client')
        throw new DomainError('too_many_streams', `This client has ${limits.perClient} event streams open, the most it may; close one first`, {
          retryAfterSeconds: RETRY_AFTER_SECONDS,
        });
      if (refusal === 'total')
        throw new DomainError('service_unavailable', `This instance serves ${limits.max} event streams, the most it may; try again later`, {
          retryAfterSeconds: RETRY_AFTER_SECONDS,
        });
      let stream: EventStream;
      try {
        stream = await EventStream.open(feed, events, resumeAfter, { budget: limits.bufferBytes, log: request.log });
      } catch (error) {
        slots.release(client);
        throw error;
      }

      reply.hijack();
      const out = reply.raw;
      // A hijacked reply sends only what is written here: the headers the hooks set (the header policy, RateLimit) too.
      out.writeHead(200, {
        ...(reply.getHeaders() as OutgoingHttpHeaders),
        'content-type': 'text/event-stream',
        'cache-control': 'no-store',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      out.write(': connected\n\n');
      openStreams.add(out, request, () => {
        stream.stop();
        slots.release(client);
      });
      stream.pipe(out);
    },
  );
}
