import type { FastifyInstance } from 'fastify';
import type { AllowedMethods } from './not-found.js';

/** What a page on an allowed origin may send and read: the bearer token and JSON; the rate-limit answers. */
const ALLOW_HEADERS = 'authorization, content-type';
const EXPOSE_HEADERS = 'retry-after, ratelimit, ratelimit-policy, location';
/** How long a browser may reuse a preflight's answer, in seconds. */
const PREFLIGHT_MAX_AGE = '600';

/**
 * CORS for the origins of CORS_ORIGINS (none by default: no hook at all). A page on such an origin
 * may call the API with a bearer token: never with the dashboard session, so
 * `Access-Control-Allow-Credentials` is never sent (the browser then neither sends the cookie nor
 * shows the answer of a request that carried it), and the session itself refuses cross-site requests.
 * A preflight to a known path answers 204 with the methods the path takes; to another origin, or a
 * path no route has, it gets the 405 or 404 of any other request.
 */
export function cors(app: FastifyInstance, origins: readonly string[], allowedMethods: AllowedMethods): void {
  if (!origins.length) return;
  const allowed = new Set(origins);
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('vary', 'origin');
    const origin = request.headers.origin;
    if (origin === undefined || !allowed.has(origin)) return done();
    reply.header('access-control-allow-origin', origin);
    const methods = request.method === 'OPTIONS' && request.headers['access-control-request-method'] ? allowedMethods(request.url) : [];
    if (!methods.length) {
      reply.header('access-control-expose-headers', EXPOSE_HEADERS);
      return done();
    }
    reply
      .code(204)
      .headers({
        'access-control-allow-methods': methods.join(', '),
        'access-control-allow-headers': ALLOW_HEADERS,
        'access-control-max-age': PREFLIGHT_MAX_AGE,
      })
      .send();
  });
}
