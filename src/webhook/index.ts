/** The system webhook's entry point: the outbox, the dispatcher and the routes. */
export { FINISHED_DELIVERY_LOGS, WebhookService } from './service.js';
export { OutboxBound, WebhookOutbox, newWebhookId } from './outbox.js';
export { webhookRoutes } from './routes.js';
