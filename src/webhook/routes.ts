import type { FastifyInstance } from 'fastify';
import { rowIdParams, withSchemaTypes } from '../http/schemas.js';
import { EVENT_TYPES } from '../events/index.js';
import type { WebhookService } from './service.js';

const deliverySchema = {
  type: 'object',
  properties: {
    id: { type: 'integer' },
    webhook_id: { type: 'string' },
    event_seq: { type: ['integer', 'null'] },
    event_type: { type: 'string' },
    url: { type: 'string' },
    attempt: { type: 'integer' },
    state: { type: 'string', enum: ['pending', 'sending', 'delivered', 'failed', 'retry_scheduled'] },
    status_code: { type: ['integer', 'null'] },
    error: { type: ['string', 'null'] },
    duration_ms: { type: ['integer', 'null'] },
    created_at: { type: 'string' },
    attempted_at: { type: ['string', 'null'] },
    due_at: { type: 'string' },
  },
} as const;

export function webhookRoutes(server: FastifyInstance, webhook: WebhookService): void {
  const app = withSchemaTypes(server);
  app.get(
    '/api/webhook/deliveries',
    {
      schema: {
        operationId: 'listWebhookDeliveries',
        tags: ['webhook'],
        summary: 'Recent delivery attempts, newest first (one row per attempt)',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            limit: { type: 'integer', minimum: 1, maximum: 500, default: 50 },
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
}
