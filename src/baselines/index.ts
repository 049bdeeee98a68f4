/** Benchmark baselines' entry point: the service and its routes. */
export { BaselineService, type StoredBaseline } from './service.js';
export { baselineRoutes } from './routes.js';
