/** The system webhook's entry point: the outbox, the dispatcher and the routes. */
export { FINISHED_DELIVERY_LOGS, WebhookService, type DeliveryView, type WebhookStatus } from './service.js';
export { ABANDONED_LAST, OutboxBound, WebhookOutbox, newWebhookId } from './outbox.js';
export { webhookRoutes } from './routes.js';
