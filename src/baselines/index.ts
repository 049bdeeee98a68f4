/** Benchmark baselines' entry point: the service, its routes, and the pure schema, comparison and formats the CLI uses. */
export { BaselineService, type StoredBaseline } from './service.js';
export { baselineRoutes } from './routes.js';
export { baselineErrors, futureError, withoutByteOrderMark, type BaselineRecord } from './schema.js';
export { compareBaselines, DEFAULT_THRESHOLD_PCT, MAX_THRESHOLD_PCT, type ComparisonReport } from './compare.js';
export type { Detection } from './detect.js';
export { formatDetection, formatHistory, formatPushFailure, formatPushSummary, formatReport, type ReportFormat } from './format.js';
