/** The HTTP shell's entry point: the server, route authentication, dashboard sessions and what routes share. */
export { createHttpServer } from './server.js';
export { loggerOptions } from './logging.js';
export { textValidator } from './json-body.js';
export { RouteAuth, SIGN_IN_LIMIT, ROUTE_ACCESS, TOKEN_SCOPES, BOT_CHALLENGE, unauthorized, type ApiCredential, type TokenScope } from './auth.js';
export { ProblemError, fieldErrors, type ProblemCode } from './problem.js';
export { SessionStore } from './sessions.js';
export { SESSION_COOKIE, SESSION_COOKIE_OPTIONS } from './auth.js';
export { ROLES, type Role } from './roles.js';
export { ThrottledLog } from './throttled-log.js';
export { addressKey, requestClient } from './client-key.js';
export { PAGE_ITEMS, pageLimit, perPage } from './page.js';
export * from './schemas.js';
