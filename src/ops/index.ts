/** Operations' entry point: metrics, health routes, retention and the start-up installation check. */
export { Metrics } from './metrics.js';
export { HTTP_DURATION_BUCKETS, requestMetrics } from './request-metrics.js';
export { opsRoutes } from './routes.js';
export { missingRedisDatabase, redisProbe, redisUnreachable, serviceTarget, startupFailure } from './startup-errors.js';
export { applyRetention, RETENTION_INTERVAL_MS } from './retention.js';
export { checkInstallation, openInstallation, servedInstallation } from './installation.js';
export { checkClock, CLOCK_CHECK_MS } from './clock.js';
