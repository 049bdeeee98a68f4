/** Scoped API tokens: the store RouteAuth resolves bearer tokens with, and their routes. */
export { ApiTokenStore, TOKEN_CACHE_MS } from './store.js';
export { tokenRoutes } from './routes.js';
