/** The HTTP shell's entry point: the server, route authentication and dashboard sessions. */
export { createHttpServer } from './server.js';
export { RouteAuth, SIGN_IN_LIMIT } from './auth.js';
export { SessionStore } from './sessions.js';
export { ThrottledLog } from './throttled-log.js';
export { addressKey } from './client-key.js';
