import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import SerializerSelector from '@fastify/fast-json-stringify-compiler';
import { resolveRouteAuth } from './auth.js';
import { PROBLEM_SCHEMA } from './openapi.js';
import { ThrottledLog } from './throttled-log.js';
import { AccessLogController, loggerOptions, requestLogger } from './logging.js';
import { answerClientError, answerRouterError, framingAndHeaderPolicy } from './framing.js';
import { shutdownDrain } from './shutdown.js';
import { jsonBodies } from './json-body.js';
import { errorHandler } from './error-handler.js';
import { notFoundAndMethodNotAllowed } from './not-found.js';
import { cors } from './cors.js';
import { apiDocs } from './api-docs.js';
import { problemPages } from './problem-pages.js';
import { BODY_LIMIT } from '../limits.js';
import { addressKey } from './client-key.js';
import type { Socket } from 'node:net';

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

export interface HttpServerOptions {
  logLevel: string;
  logFormat?: 'auto' | 'json' | 'pretty';
  trustProxy: string | false;
  version: string;
  /** CORS_ORIGINS: the origins whose pages may call the API with a bearer token. */
  corsOrigins?: readonly string[];
  /** HTTP_REQUEST_TIMEOUT_MS (default 30 s). */
  requestTimeoutMs?: number;
  /** HTTP_CONNECTIONS_PER_ADDRESS (0 or unset: no cap). */
  connectionsPerAddress?: number;
}

/**
 * Closes a new connection at once when its address (an IPv6 client by its /64, as the rate limits
 * key it) already holds `max`: the request timeouts end slow connections, but one client opening
 * them faster than they end would still take every socket the process may have. Not behind a proxy
 * (TRUST_PROXY): there every connection comes from the proxy, which is the place for such a cap.
 */
function capConnectionsPerAddress(app: FastifyInstance, max: number): void {
  const open = new Map<string, number>();
  app.server.on('connection', (socket: Socket) => {
    const key = addressKey(socket.remoteAddress ?? '');
    const count = open.get(key) ?? 0;
    if (count >= max) {
      app.throttledLog.write(
        app.log,
        key,
        'warn',
        { ip: socket.remoteAddress },
        `connection refused: the address holds HTTP_CONNECTIONS_PER_ADDRESS (${max}) connections`,
      );
      socket.destroy();
      return;
    }
    open.set(key, count + 1);
    socket.once('close', () => {
      const left = open.get(key)! - 1;
      if (left === 0) open.delete(key);
      else open.set(key, left);
    });
  });
}

/**
 * A connection that sends its request slowly, or nothing at all, is answered 408 and closed after
 * these: without them one client held thousands of sockets (a byte of body every few seconds, or
 * headers and no body) and the service answered nobody else. Node checks them every few seconds.
 */
function requestTimeouts(requestTimeoutMs = 30_000) {
  return {
    requestTimeout: requestTimeoutMs,
    headersTimeout: Math.min(15_000, requestTimeoutMs),
    connectionsCheckingInterval: Math.min(5_000, Math.ceil(requestTimeoutMs / 4)),
  };
}

/**
 * Fastify's own response serializers, each compiled at its first response rather than at start-up
 * (as the validators are: json-body.ts); compiling them all was a large share of start-up CPU.
 */
const serializeOnFirstUse: SerializerSelector.SerializerFactory = (...factoryArguments) => {
  const compile = SerializerSelector()(...factoryArguments);
  return (route) => {
    let serialize: SerializerSelector.Serializer | null = null;
    return (document) => (serialize ??= compile(route))(document);
  };
};

function fastify(options: HttpServerOptions): FastifyInstance {
  const { requestTimeout, headersTimeout, connectionsCheckingInterval } = requestTimeouts(options.requestTimeoutMs);
  return Fastify({
    requestTimeout,
    schemaController: { compilersFactory: { buildSerializer: serializeOnFirstUse } },
    logger: loggerOptions(options.logLevel, options.logFormat),
    logController: new AccessLogController(options.logLevel),
    childLoggerFactory: requestLogger,
    bodyLimit: BODY_LIMIT,
    trustProxy: options.trustProxy === false ? false : options.trustProxy.split(',').map((entry) => entry.trim()),
    return503OnClosing: true,
    // A request without Host is refused by requestFramingError, as problem+json with the header policy.
    http: { requireHostHeader: false, headersTimeout, connectionsCheckingInterval },
    forceCloseConnections: 'idle',
    // Long path parameters reach validation, which names the field (ids are at most 64 characters).
    routerOptions: { maxParamLength: 2048 },
    clientErrorHandler: answerClientError,
    frameworkErrors: (error, _request, reply) => answerRouterError(error, reply as FastifyReply),
  });
}

/**
 * The HTTP shell shared by every capability, in parts registered in order (each hook runs in the
 * order added): the header policy and framing check first, so every answer carries the policy; then
 * the shutdown drain, strict JSON bodies, problem+json for every failure, 404 and 405, CORS
 * with its preflight, each route's auth, the OpenAPI document and the problem pages.
 */
export async function createHttpServer(options: HttpServerOptions): Promise<FastifyInstance> {
  const app = fastify(options);
  app.decorate('throttledLog', new ThrottledLog(app.log));
  if (options.connectionsPerAddress && options.trustProxy === false) capConnectionsPerAddress(app, options.connectionsPerAddress);
  app.addHook('onClose', (_instance, done) => {
    app.throttledLog.flush();
    done();
  });
  framingAndHeaderPolicy(app);
  shutdownDrain(app);
  jsonBodies(app);
  errorHandler(app);
  cors(app, options.corsOrigins ?? [], notFoundAndMethodNotAllowed(app));
  // Before any route (and before swagger collects them): each route's auth is fixed at registration.
  resolveRouteAuth(app);
  app.addSchema(PROBLEM_SCHEMA);
  await apiDocs(app, options.version);
  problemPages(app);
  return app;
}
