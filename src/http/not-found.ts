import type { FastifyInstance } from 'fastify';
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import { problem } from './problem.js';

/** The methods a 405's `Allow` (and a CORS preflight) can name. */
const ALLOW_CANDIDATES: HTTPMethod[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** The methods the routes of a URL's path take (none: no route has the path). */
export type AllowedMethods = (url: string) => HTTPMethod[];

/**
 * What no route answers: a known path asked with another method is a 405 naming the methods it
 * takes (RFC 9110 section 15.5.6), anything else a 404. A second router holds every route's path,
 * matched the way Fastify matches; the methods of a path are returned for the CORS preflight.
 */
export function notFoundAndMethodNotAllowed(app: FastifyInstance): AllowedMethods {
  const knownPaths = FindMyWay({ maxParamLength: 2048 });
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat())
      if (!knownPaths.hasRoute(method as HTTPMethod, route.url)) knownPaths.on(method as HTTPMethod, route.url, () => {});
  });
  const allowedMethods: AllowedMethods = (url) => ALLOW_CANDIDATES.filter((method) => knownPaths.find(method, url) !== null);
  app.setNotFoundHandler((request, reply) => {
    const allowed = allowedMethods(request.url);
    // A route of this very method that found nothing (a static file that is not there) is a 404.
    if (allowed.length && !allowed.includes(request.method as HTTPMethod)) {
      const body = problem('method_not_allowed', `${request.method} is not allowed here; allowed: ${allowed.join(', ')}`);
      reply.code(405).header('allow', allowed.join(', ')).type('application/problem+json').send(body);
      return;
    }
    reply
      .code(404)
      .type('application/problem+json')
      .send(problem('not_found', `No route for ${request.method} ${request.url.split('?')[0]}`));
  });
  return allowedMethods;
}
