/** Presence's entry point: the service and its routes. */
export * from './service.js';
export { presenceRoutes } from './routes.js';
