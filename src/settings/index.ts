/** Integration settings' entry point: the store, the routes, the model and its validation rules. */
export { SettingsStore, type WebhookTarget, type WebhookView } from './store.js';
export { settingsRoutes, type IntegrationControls } from './routes.js';
export * from './model.js';
export * from './validate.js';
export { certificateSummary } from './certificates.js';
