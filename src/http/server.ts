import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyServerOptions } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { Ajv, str } from 'ajv';
import addFormats from 'ajv-formats';
import { openApiSecurity, resolveRouteAuth, SESSION_COOKIE } from './auth.js';
import { errorCodes, PROBLEM_SCHEMA, problemResponses, requireAnsweredFields } from './openapi.js';
import { jsonShapeError } from './input-shape.js';
import { MAX_JSON_BYTES, withSchemaTypes } from './schemas.js';
import { policyHeaders, type HeaderPolicy } from './header-policy.js';
import { ThrottledLog } from './throttled-log.js';
import { codeForStatus, fieldErrors, invalid, isProblemCode, problem, ProblemError, PROBLEMS } from './problem.js';
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import { storageFailure } from '../db/index.js';
import { BODY_LIMIT, jsonBytes } from '../limits.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The request body exactly as received; bot signatures are computed over these bytes. */
    rawBody?: Buffer;
  }
  interface FastifyInstance {
    /** For the lines any caller can cause once per request (throttled-log.ts). */
    throttledLog: ThrottledLog;
  }
}

/**
 * One header policy on every response. An API answer needs no content at all; the dashboard and
 * /docs widen the CSP for their pages (a route's `config.headerPolicy`). No HSTS: TLS is a reverse
 * proxy's business here, and a LAN install on plain HTTP must keep working.
 */
const HEADER_POLICY: HeaderPolicy = {
  contentSecurityPolicy: {
    useDefaults: false,
    directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"], baseUri: ["'none'"], formAction: ["'none'"] },
  },
  frameguard: { action: 'deny' },
  referrerPolicy: { policy: 'no-referrer' },
  strictTransportSecurity: false,
};
const POLICY_HEADERS = policyHeaders(HEADER_POLICY);
/** The same, for the answers written to the socket before Fastify sees the request. */
const POLICY_HEADER_LINES = Object.entries(POLICY_HEADERS)
  .map(([name, value]) => `${name}: ${value}\r\n`)
  .join('');

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Overrides of the server-wide header policy for this route (the dashboard's page CSP). */
    headerPolicy?: HeaderPolicy;
    /** The route's headers, computed once from the policy and its override (set when the route is added). */
    policyHeaders?: Readonly<Record<string, string>>;
  }
}

/**
 * Node's HTTP parser refuses some requests before Fastify sees them (malformed syntax, headers over
 * the size limit, a request too slow to arrive). Those answers are problem+json like every other.
 */
function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
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

/**
 * Why a body the JSON parser refused is still well-formed JSON: a prototype-poisoning key, named with
 * its path (the parser's own error says only "not valid JSON"). Runs on refused bodies only.
 */
function poisonedJsonError(body: Buffer): ProblemError | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  const shapeError = jsonShapeError(parsed);
  return shapeError && invalid(shapeError.path, shapeError.message);
}

/**
 * Request lines and headers HTTP/1.1 forbids that Node's parser lets through (RFC 9112): an asterisk
 * target outside a bare `OPTIONS *`, an absolute-form target with userinfo or a path not starting with
 * "/" (the router read these as paths), and a Host field missing (Node's own 400 would carry no header
 * policy) or given twice (Node keeps the first; a proxy in front may have used the other).
 */
function requestFramingError(raw: IncomingMessage): ProblemError | undefined {
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

/** Errors that mean a backing service is briefly away (database restarting, lock timeout): 503, not 500. */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  '57P01',
  '57P02',
  '57P03',
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
  'SQLITE_BUSY',
]);
/** A database that cannot write for lack of disk is not back in 5 s: it waits for someone to free space. */
const STORAGE_RETRY_AFTER_SECONDS = '30';

export function isUnavailable(error: { code?: unknown; message?: string }): boolean {
  return (
    UNAVAILABLE_CODES.has(String(error.code)) ||
    /Connection terminated|connection timeout|timeout exceeded when trying to connect|is not queryable/i.test(error.message ?? '')
  );
}

/**
 * A unique key another request took at the same moment (PostgreSQL unique_violation, SQLite's
 * constraint codes): a 409, never a 500. Services insert with `on conflict` and answer their own
 * 409 naming the id; this is the backstop for a write that does not.
 */
const UNIQUE_VIOLATION_CODES = new Set(['23505', 'SQLITE_CONSTRAINT_PRIMARYKEY', 'SQLITE_CONSTRAINT_UNIQUE']);

// Bodies are validated without coercion (a "5" is not a 5); query strings and path params are text, so they are coerced.
const bodyValidator = new Ajv({ allErrors: true, coerceTypes: false, removeAdditional: false, useDefaults: true, strict: false });
export const textValidator = new Ajv({ allErrors: true, coerceTypes: 'array', removeAdditional: false, useDefaults: true, strict: false });
addFormats.default(bodyValidator);
/** A JSON document's size bound in bytes of its UTF-8 JSON text (src/limits.ts, `JSON_LIMITS`). */
bodyValidator.addKeyword({
  keyword: MAX_JSON_BYTES,
  schemaType: 'number',
  validate: (limit: number, data: unknown) => jsonBytes(data) <= limit,
  error: { message: ({ schemaCode }) => str`must be at most ${schemaCode} bytes as JSON` },
});
addFormats.default(textValidator);

/** Secrets that must never reach a log line, wherever they appear in a logged object. */
const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-bot-signature"]',
  'res.headers["set-cookie"]',
  '*.password',
  '*.secret',
  '*.shared_secret',
  '*.token',
  '*.ca_cert',
  '*.client_cert',
  '*.client_key',
  '*.client_key_passphrase',
];

/**
 * The one logger setup of every process: secrets redacted; JSON for log collectors, or readable
 * lines (pino-pretty) for a person at a terminal.
 */
export function loggerOptions(
  level: string,
  format: 'auto' | 'json' | 'pretty' = 'json',
  terminal = Boolean(process.stdout.isTTY),
): FastifyServerOptions['logger'] {
  const pretty = format === 'pretty' || (format === 'auto' && terminal);
  return {
    level,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    ...(pretty ? { transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss', ignore: 'pid,hostname' } } } : {}),
  };
}

/** The levels that log every request and response (docs/configuration.md). */
const ACCESS_LOG_LEVELS = new Set(['debug', 'trace']);

/**
 * Fastify's two lines per request (incoming, completed) are the access log of LOG_LEVEL=debug: at
 * info they cost about 20 us per request (a refused one took 57-68 us: bench/README.md), and a flood of requests a flood of
 * lines. Its other lines (a request that errored, a response stream that failed) are kept.
 */
class AccessLogController extends LogController {
  constructor(private readonly accessLog: boolean) {
    super();
  }

  override incomingRequest(...args: Parameters<LogController['incomingRequest']>): void {
    if (this.accessLog) super.incomingRequest(...args);
  }

  override requestCompleted(...args: Parameters<LogController['requestCompleted']>): void {
    if (this.accessLog || args[0]) super.requestCompleted(...args);
  }

  /** A client that went away mid-download is the access log's business; a stream that failed is not. */
  override streamError(...args: Parameters<LogController['streamError']>): void {
    if (this.accessLog || (args[0] as { code?: string }).code !== 'ERR_STREAM_PREMATURE_CLOSE') super.streamError(...args);
  }
}

/** The methods a 405's `Allow` can name. */
const ALLOW_CANDIDATES: HTTPMethod[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** How long a shutdown lets running requests finish before it closes their connections. */
const SHUTDOWN_DRAIN_MS = 8000;

/**
 * The HTTP shell shared by every capability: strict JSON validation (unknown properties rejected,
 * every violation reported), problem+json for every failure, the raw body kept for signatures,
 * and the OpenAPI 3.1 document generated from the route schemas.
 */
export async function createHttpServer(options: {
  logLevel: string;
  logFormat?: 'auto' | 'json' | 'pretty';
  trustProxy: string | false;
  version: string;
}): Promise<FastifyInstance> {
  const app = Fastify({
    logger: loggerOptions(options.logLevel, options.logFormat),
    logController: new AccessLogController(ACCESS_LOG_LEVELS.has(options.logLevel)),
    bodyLimit: BODY_LIMIT,
    trustProxy: options.trustProxy === false ? false : options.trustProxy.split(',').map((entry) => entry.trim()),
    return503OnClosing: true,
    // A request without Host is refused by requestFramingError, as problem+json with the header policy.
    http: { requireHostHeader: false },
    forceCloseConnections: 'idle',
    // Long path parameters reach validation, which names the field (ids are at most 64 characters).
    routerOptions: { maxParamLength: 2048 },
    clientErrorHandler: answerClientError,
    // Errors the router raises before any route runs (bad URL encoding, over-long parameters).
    frameworkErrors: (error, _request, reply) => {
      // The router refused the request before any hook ran: apply the header policy here.
      (reply as FastifyReply).headers(POLICY_HEADERS);
      const body = problem(error.statusCode === 414 ? 'uri_too_long' : 'validation_failed', error.message);
      (reply as FastifyReply).code(body.status).type('application/problem+json').send(body);
    },
  });

  app.decorate('throttledLog', new ThrottledLog(app.log));
  app.addHook('onClose', (_instance, done) => {
    app.throttledLog.flush();
    done();
  });

  // Registered before any hook that can throw, so errors and 404s carry the policy too.
  app.addHook('onRoute', (route) => {
    const override = route.config?.headerPolicy;
    if (override) route.config = { ...route.config, policyHeaders: policyHeaders({ ...HEADER_POLICY, ...override } as HeaderPolicy) };
  });
  app.addHook('onRequest', (request, reply, done) => {
    const framingError = requestFramingError(request.raw);
    // A refused request target gets the API's policy, not that of the route the router guessed.
    reply.headers((!framingError && request.routeOptions.config.policyHeaders) || POLICY_HEADERS);
    done(framingError);
  });

  // Shutdown: close waits for every connection. Requests still running are answered with
  // `Connection: close`, so their keep-alive connections end with them (a client honouring our
  // `Keep-Alive: timeout=72` would otherwise hold one for a minute), and whatever still runs after
  // SHUTDOWN_DRAIN_MS is cut, so closing always ends.
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    setTimeout(() => app.server.closeAllConnections(), SHUTDOWN_DRAIN_MS).unref();
    done();
  });
  // Hooks every request passes through take a callback: an async hook costs a promise per request.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });

  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? bodyValidator : textValidator).compile(schema as object));

  // The API speaks JSON only: any other body is a 415, not a string that fails validation later.
  app.removeContentTypeParser('text/plain');
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    request.rawBody = body as Buffer;
    // JSON is UTF-8 (RFC 8259): a body declared in another charset would be read as something else.
    const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(request.headers['content-type'] ?? '')?.[1]?.toLowerCase();
    if (charset && charset !== 'utf-8' && charset !== 'utf8')
      return done(new ProblemError('unsupported_media_type', `JSON bodies are UTF-8; charset=${charset.slice(0, 40)} is not accepted`));
    // Generic clients send `Content-Type: application/json` on every request, a bodyless DELETE too:
    // an empty body where the route takes none is no body, not malformed JSON.
    if ((body as Buffer).length === 0 && !request.routeOptions.schema?.body) return done(null, undefined);
    void parseJson(request, body as unknown as string, (error, parsed) => {
      if (error) return done(poisonedJsonError(body as Buffer) ?? error);
      const shapeError = jsonShapeError(parsed);
      done(shapeError ? invalid(shapeError.path, shapeError.message) : null, parsed);
    });
  });
  // Query strings and path parameters are text: the same NUL rule, before validation coerces them.
  app.addHook('preValidation', (request, _reply, done) => {
    const shapeError = jsonShapeError(request.query, 'querystring:') ?? jsonShapeError(request.params, 'params:');
    done(shapeError ? invalid(shapeError.path, shapeError.message) : undefined);
  });

  app.setErrorHandler((error: FastifyError & { validation?: unknown[]; validationContext?: string }, request, reply) => {
    if (error instanceof ProblemError) {
      return reply.code(error.status).headers(error.headers).type('application/problem+json').send(error.toProblem());
    }
    if (error.validation) {
      const where = error.validationContext === 'body' ? '' : `${error.validationContext}:`;
      const errors = fieldErrors(error.validation as Parameters<typeof fieldErrors>[0], where);
      const detail = errors.map((entry) => `${entry.path} ${entry.message}`).join('; ');
      return reply
        .code(400)
        .type('application/problem+json')
        .send(problem('validation_failed', detail, errors));
    }
    const storage = storageFailure(error);
    if (storage) {
      request.server.throttledLog.storageFailure(request.log, error);
      return reply
        .code(503)
        .header('retry-after', STORAGE_RETRY_AFTER_SECONDS)
        .type('application/problem+json')
        .send(problem('service_unavailable', `The database cannot write (${storage}); try again later`));
    }
    if (isUnavailable(error)) {
      request.server.throttledLog.write(request.log, 'unavailable', 'warn', { req: request, err: error }, 'backing service unavailable');
      return reply
        .code(503)
        .header('retry-after', '5')
        .type('application/problem+json')
        .send(problem('service_unavailable', 'A backing service is unavailable; try again shortly'));
    }
    if (UNIQUE_VIOLATION_CODES.has(String(error.code))) {
      request.log.warn({ req: request, err: error }, 'unique key taken by a concurrent write');
      return reply
        .code(409)
        .type('application/problem+json')
        .send(problem('conflict', 'A record with the same key was written at the same time; read the current state and retry'));
    }
    const status = error.statusCode && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
    if (status >= 500) {
      // At info this is the only line of the request (the access log is debug's): it names it.
      request.log.error({ req: request, err: error }, 'request failed');
      return reply.code(500).type('application/problem+json').send(problem('internal_error', 'The server could not complete the request'));
    }
    const body = problem(codeForStatus(status), status === 413 ? `Request body exceeds ${BODY_LIMIT} bytes` : error.message);
    return reply.code(body.status).type('application/problem+json').send(body);
  });

  // A known path asked with another method is a 405 naming the methods it takes (RFC 9110 section
  // 15.5.6), not a 404. A second router holds every route's path, matched the way Fastify matches.
  const knownPaths = FindMyWay({ maxParamLength: 2048 });
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat())
      if (!knownPaths.hasRoute(method as HTTPMethod, route.url)) knownPaths.on(method as HTTPMethod, route.url, () => {});
  });
  app.setNotFoundHandler((request, reply) => {
    const allowed = ALLOW_CANDIDATES.filter((method) => knownPaths.find(method, request.url) !== null);
    // A route of this very method that found nothing (a static file that is not there) is a 404.
    if (allowed.length && !allowed.includes(request.method as HTTPMethod)) {
      reply
        .code(405)
        .header('allow', allowed.join(', '))
        .type('application/problem+json')
        .send(problem('method_not_allowed', `${request.method} is not allowed here; allowed: ${allowed.join(', ')}`));
      return;
    }
    reply
      .code(404)
      .type('application/problem+json')
      .send(problem('not_found', `No route for ${request.method} ${request.url.split('?')[0]}`));
  });

  // Before any route (and before swagger collects them): each route's auth is fixed at registration.
  resolveRouteAuth(app);
  app.addSchema(PROBLEM_SCHEMA);

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      // Relative: the document describes whichever host served it, behind any proxy (docs/api.md).
      servers: [{ url: '/' }],
      info: {
        title: 'Mothership',
        version: options.version,
        description: 'Benchmark baselines, presence and home automation integration, signed enrichment requests. See docs/api.md.',
      },
      components: {
        securitySchemes: {
          admin: {
            type: 'http',
            scheme: 'bearer',
            description:
              'The admin token (ADMIN_TOKEN or DATA_DIR/admin-token), or an API token (mst_..., POST /api/tokens) of one of the scopes the operation lists: `ingest` (events and heartbeats), `read` (GET and HEAD), `admin` (everything). A token without the scope gets 403 naming the scope needed.',
          },
          session: {
            type: 'apiKey',
            in: 'cookie',
            name: SESSION_COOKIE,
            description: 'The dashboard session from POST /api/session; honoured on same-origin requests only',
          },
          // A bot request carries four headers, all required: one requirement naming the four schemes.
          botId: { type: 'apiKey', in: 'header', name: 'X-Bot-Id', description: 'The bot id' },
          botTimestamp: { type: 'apiKey', in: 'header', name: 'X-Bot-Timestamp', description: 'Unix seconds, within 300 s of the server clock' },
          botNonce: { type: 'apiKey', in: 'header', name: 'X-Bot-Nonce', description: '16 to 64 characters of [A-Za-z0-9_-], never reused within 11 minutes' },
          botSignature: {
            type: 'apiKey',
            in: 'header',
            name: 'X-Bot-Signature',
            description:
              'v1=<lowercase hex HMAC-SHA256, keyed with the shared secret, of "v1\\n" + METHOD + "\\n" + PATH_AND_QUERY + "\\n" + X-Bot-Timestamp + "\\n" + X-Bot-Nonce + "\\n" + hex(sha256(raw body))>; ' +
              'e.g. for POST /api/request-enrichment at 1795300000 with nonce 3f9c2a7b1d8e4f60aa11: "v1\\nPOST\\n/api/request-enrichment\\n1795300000\\n3f9c2a7b1d8e4f60aa11\\n<sha256 hex of the body>". ' +
              'Several space-separated entries are allowed (any one may match). Every failure is the same 401. See docs/enrichment.md.',
          },
        },
        schemas: {},
      },
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, index) => String(json.$id ?? `def-${index}`) },
    transform: ({ schema, url, route }) => {
      const security = route.config?.auth && openApiSecurity(route.config.auth, [route.method].flat()[0]!);
      // Error responses are added to the document only: a route's own response schemas also drive serialization.
      const response = { ...problemResponses(errorCodes(url, schema, route.config)), ...requireAnsweredFields((schema?.response as object) ?? {}) };
      // A public route says so (`security: []`) rather than leaving a reader to guess.
      return { schema: { ...(schema ?? {}), response, security: security ?? [] } as typeof schema, url };
    },
  });
  // Swagger UI's own scripts and styles; it sets element styles at run time, hence 'unsafe-inline' for styles only.
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    staticCSP:
      "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  // The `type` of every problem resolves to its entry of the registry.
  withSchemaTypes(app).get(
    '/problems/:code',
    {
      schema: {
        operationId: 'getProblem',
        tags: ['operations'],
        summary: "What a problem type means: the target of every error body's `type` (JSON, or a short page for a browser)",
        params: { type: 'object', required: ['code'], properties: { code: { type: 'string', maxLength: 64 } } },
        response: {
          200: {
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  properties: {
                    type: { type: 'string' },
                    code: { type: 'string' },
                    status: { type: 'integer' },
                    title: { type: 'string' },
                    description: { type: 'string' },
                  },
                },
              },
              'text/html': { schema: { type: 'string' } },
            },
          },
        },
      },
    },
    async (request, reply) => {
      const { code } = request.params;
      if (!isProblemCode(code)) throw new ProblemError('not_found', `No problem type "${code}"`);
      const { status, title, description } = PROBLEMS[code];
      const page = { type: `/problems/${code}`, code, status, title, description };
      // A browser following the `type` link asks for HTML; anything else gets JSON.
      if (!/\btext\/html\b/.test(request.headers.accept ?? '')) return page;
      const escape = (text: string) => text.replace(/[&<>"]/g, (char) => `&#${char.charCodeAt(0)};`);
      return reply
        .type('text/html; charset=utf-8')
        .send(
          `<!doctype html><meta charset="utf-8"><title>${escape(title)}</title><h1>${status} ${escape(title)}</h1><p><code>${code}</code></p><p>${escape(description)}</p><p><a href="/docs">API reference</a></p>\n`,
        );
    },
  );

  return app;
}
