/** The event log's entry point: the log and its bus, every event type, and the routes. */
export * from './types.js';
export { EVENT_LOG, EventLog, type AfterAppend, type AppendHook, type AppendStatementPart, type Emit, type Writer } from './log.js';
export { eventRoutes } from './routes.js';
export { tailLog, type Tail } from './tail.js';
