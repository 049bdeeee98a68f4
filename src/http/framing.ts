import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { POLICY_HEADER_LINES, POLICY_HEADERS, routePolicyHeaders } from './header-policy.js';
import { codeForStatus, problem, ProblemError } from './problem.js';

/**
 * Node's HTTP parser refuses some requests before Fastify sees them (malformed syntax, headers over
 * the size limit, a request too slow to arrive). Those answers are problem+json like every other.
 */
export function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const [reason, code] =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? ['Request Header Fields Too Large', 'headers_too_large' as const]
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? ['Request Timeout', 'request_timeout' as const]
        : ['Bad Request', 'bad_request' as const];
  const body = problem(code, 'The request could not be read as HTTP');
  const status = body.status;
  const text = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n` +
      `${POLICY_HEADER_LINES}Connection: close\r\n\r\n${text}`,
  );
}

/** Errors the router raises before any route runs (bad URL encoding, over-long parameters), so before any hook. */
export function answerRouterError(error: Error & { statusCode?: number }, reply: FastifyReply): void {
  reply.headers(POLICY_HEADERS);
  const body = problem(codeForStatus(error.statusCode ?? 400), error.message);
  reply.code(body.status).type('application/problem+json').send(body);
}

/**
 * Request lines and headers HTTP/1.1 forbids that Node's parser lets through (RFC 9112): an asterisk
 * target outside a bare `OPTIONS *`, an absolute-form target with userinfo or a path not starting with
 * "/" (the router read these as paths), and a Host field missing (Node's own 400 would carry no header
 * policy) or given twice (Node keeps the first; a proxy in front may have used the other).
 */
export function requestFramingError(raw: IncomingMessage): ProblemError | undefined {
  const target = raw.url ?? '';
  if (target.startsWith('*')) {
    return target === '*' && raw.method === 'OPTIONS' ? undefined : new ProblemError('bad_request', 'The request target "*" is only valid as "OPTIONS *"');
  }
  if (!target.startsWith('/') && !/^[a-z][a-z0-9+.-]*:\/\/[^/?#@]*(?:[/?]|$)/i.test(target))
    return new ProblemError('bad_request', 'The request target must be a path starting with "/" or an absolute URL');
  let hosts = 0;
  for (let index = 0; index < raw.rawHeaders.length; index += 2) if (raw.rawHeaders[index]!.toLowerCase() === 'host') hosts++;
  if (hosts > 1) return new ProblemError('bad_request', 'The request has more than one Host header field');
  if (hosts === 0 && raw.httpVersion === '1.1') return new ProblemError('bad_request', 'An HTTP/1.1 request needs a Host header field');
  return undefined;
}

/**
 * The header policy on every answer and the framing check of every request. Registered before any
 * hook that can throw, so errors and 404s carry the policy too.
 */
export function framingAndHeaderPolicy(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    const headers = routePolicyHeaders(route);
    if (headers) route.config = { ...route.config, policyHeaders: headers };
  });
  app.addHook('onRequest', (request, reply, done) => {
    const framingError = requestFramingError(request.raw);
    // A refused request target gets the API's policy, not that of the route the router guessed.
    reply.headers((!framingError && request.routeOptions.config.policyHeaders) || POLICY_HEADERS);
    done(framingError);
  });
}
