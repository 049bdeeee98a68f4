import type { FastifyInstance } from 'fastify';
import { pageLimit, perPage, rowIdParams, withSchemaTypes } from '../http/index.js';
import { EVENT_TYPES } from '../events/index.js';
import { RECORD_PAGE, WEBHOOK_LOG_BODY_LIMIT } from '../limits.js';
import { REDELIVER_ALL_BATCH, type WebhookService } from './service.js';

const deliverySchema = {
  type: 'object',
  properties: {
    id: { type: 'integer' },
    webhook_id: { type: 'string' },
    event_seq: { type: ['integer', 'null'] },
    event_type: { type: 'string' },
    url: { type: 'string' },
    attempt: { type: 'integer' },
    state: {
      type: 'string',
      enum: ['pending', 'sending', 'delivered', 'failed', 'retry_scheduled', 'retried', 'abandoned'],
      description:
        'This attempt: retry_scheduled while its retry waits, retried once the retry has its own outcome, abandoned when the outbox was at its bound',
    },
    status_code: { type: ['integer', 'null'] },
    error: { type: ['string', 'null'] },
    duration_ms: { type: ['integer', 'null'] },
    created_at: { type: 'string' },
    attempted_at: { type: ['string', 'null'] },
    due_at: { type: 'string' },
    payload: { type: 'string', description: `The JSON text sent (the first ${WEBHOOK_LOG_BODY_LIMIT} bytes)` },
    response_body: {
      type: ['string', 'null'],
      description: `The start of the receiver's answer (${WEBHOOK_LOG_BODY_LIMIT} bytes); null before the attempt or without an answer`,
    },
  },
} as const;

export function webhookRoutes(server: FastifyInstance, webhook: WebhookService): void {
  const app = withSchemaTypes(server);
  app.get(
    '/api/webhook/deliveries',
    {
      config: { rateLimit: { scale: perPage(RECORD_PAGE) } },
      schema: {
        operationId: 'listWebhookDeliveries',
        tags: ['webhook'],
        summary: 'The delivery attempts written last, newest attempt first (one row per attempt, with the payload sent and the answer)',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            limit: pageLimit(RECORD_PAGE),
            state: { type: 'string', enum: deliverySchema.properties.state.enum, description: 'Only attempts in this state' },
            event_type: { type: 'string', enum: EVENT_TYPES, description: 'Only attempts of this event type' },
          },
        },
        response: { 200: { type: 'array', items: deliverySchema } },
      },
    },
    (request) => webhook.list(request.query),
  );
  app.post(
    '/api/webhook/deliveries/:id/redeliver',
    {
      config: { problems: ['conflict'] },
      schema: {
        operationId: 'redeliverWebhookDelivery',
        tags: ['webhook'],
        summary: 'Send a logged delivery again (same webhook-id and body) to the URL configured now; 409 without one',
        params: rowIdParams,
        response: { 202: deliverySchema },
      },
    },
    async (request, reply) => reply.code(202).send(await webhook.redeliver(request.params.id)),
  );
  app.post(
    '/api/webhook/deliveries/redeliver-failed',
    {
      config: { problems: ['conflict'] },
      schema: {
        operationId: 'redeliverFailedWebhookDeliveries',
        tags: ['webhook'],
        summary: `Send every delivery whose last attempt failed again (at most ${REDELIVER_ALL_BATCH} per call, oldest first) to the URL configured now; 409 without one`,
        response: {
          202: {
            type: 'object',
            properties: { redelivered: { type: 'integer', description: `How many were queued; ${REDELIVER_ALL_BATCH} means more may be left: call again` } },
          },
        },
      },
    },
    async (_request, reply) => reply.code(202).send({ redelivered: await webhook.redeliverFailed() }),
  );
}
