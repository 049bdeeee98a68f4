/** Presence's entry point: the service, its routes and how often its sweeps run. */
export * from './service.js';
export { presenceRoutes } from './routes.js';
export { awaySweepIntervalMs, nameKey, nodeSweepIntervalMs } from './transitions.js';
