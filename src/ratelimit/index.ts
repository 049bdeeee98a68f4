import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { addressKey, ROUTE_ACCESS } from '../http/index.js';
import { DomainError } from '../errors.js';
import type { Metrics } from '../ops/index.js';
import { ConfigError } from '../config.js';
import type { Decision } from './bucket.js';
import { rateLimitItems } from './headers.js';
import type { RateLimiter } from './limiter.js';

export { rateLimitItems } from './headers.js';
export { takeTokens, type BucketPolicy, type BucketState } from './bucket.js';
export { RateLimiter } from './limiter.js';
export { MemoryStore, type RateLimitStore } from './memory-store.js';
export { REDIS_COMMAND_TIMEOUT_MS, RedisStore } from './redis-store.js';

/** Per-route limiting: the bucket group and how many tokens one request costs (the AllowN check). */
export interface RouteRateLimit {
  group?: string;
  cost?: number;
  /** How many times its cost a request pays, read from its query (a page of many items: http's perPage). */
  scale?: (query: Readonly<Record<string, unknown>>) => number;
  /** Refuse (503) rather than let requests through while the store is away, whatever RATE_LIMIT_FAIL_OPEN says: for buckets that guard a credential. */
  failClosed?: boolean;
}

interface Limit {
  group: string;
  cost: number;
  scale?: RouteRateLimit['scale'];
  failClosed: boolean;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** `false` exempts a route (liveness, metrics, static assets). */
    rateLimit?: RouteRateLimit | false;
  }
}

const DEFAULT_GROUP = 'default';

/**
 * The bucket of a request authenticated by a valid token (the admin token or an API token), keyed
 * `<group>:token:<id>`: a script importing 500 persons is not an anonymous client. It is never
 * tighter than the address bucket RATE_LIMIT_CAPACITY and RATE_LIMIT_REFILL_PER_SEC configure.
 */
export const TOKEN_POLICY = { capacity: 1000, refillPerSecond: 100 } as const;

/**
 * Applies the limiter to every route: keyed by client and route group, with the route's cost. The
 * client is `ip:<address>` (an IPv6 client by its /64) on public routes; a route that takes credentials is charged by its check
 * once the caller is known (RouteAuth: `token:<id>` for a valid token, on the token limiter, else the
 * address; the enrichment module: `bot:<id>` once the signature is verified). Emits the IETF
 * RateLimit-Policy / RateLimit headers, and a 429 problem with Retry-After when the bucket is empty.
 */
export class RateLimitGuard {
  constructor(
    private readonly limiter: RateLimiter,
    private readonly tokenLimiter: RateLimiter,
    private readonly metrics: Metrics,
    private readonly options: { failOpen: boolean; costs: Record<string, number> },
  ) {}

  /** The one reading of a route's limit: its group, its cost (RATE_LIMIT_COSTS overrides the route's). */
  limitOf(config: RouteRateLimit | undefined): Limit {
    const group = config?.group ?? DEFAULT_GROUP;
    return { group, cost: this.options.costs[group] ?? config?.cost ?? 1, scale: config?.scale, failClosed: config?.failClosed ?? false };
  }

  /** A check that charges `config` (not the route's own limit) to the client address: the sign-in bucket on a wrong admin token. */
  addressCharge(config: RouteRateLimit): (request: FastifyRequest, reply: FastifyReply) => Promise<void> {
    const limit = this.limitOf(config);
    return (request, reply) => this.enforce(request, reply, addressKey(request.ip), limit);
  }

  private route(request: FastifyRequest): Limit | null {
    const config = request.routeOptions.config?.rateLimit;
    if (config === false || !request.routeOptions.url) return null;
    return this.limitOf(config);
  }

  register(app: FastifyInstance): void {
    const groups = new Set<string>();
    app.addHook('onRoute', (route) => {
      const config = route.config?.rateLimit;
      if (config === false) return;
      const { group, cost } = this.limitOf(config);
      groups.add(group);
      // A cost the bucket can never hold would answer 429 forever: refuse to start instead.
      if (cost > this.limiter.policy.capacity) {
        throw new ConfigError(
          `RATE_LIMIT_CAPACITY ${this.limiter.policy.capacity} is below what ${route.method} ${route.url} costs (${cost} tokens, group ${group}): raise RATE_LIMIT_CAPACITY to at least ${cost} or lower the group's cost in RATE_LIMIT_COSTS (${group}=${this.limiter.policy.capacity})`,
        );
      }
    });
    // A group no route has (a typing slip) would silently change nothing.
    app.addHook('onReady', async () => {
      const unknown = Object.keys(this.options.costs).filter((group) => !groups.has(group));
      if (unknown.length)
        throw new ConfigError(`RATE_LIMIT_COSTS names ${unknown.join(', ')}, which no route has: the groups are ${[...groups].sort().join(', ')}`);
    });
    app.addHook('onRequest', (request, reply, done) => {
      // A route that takes credentials is charged by RouteAuth, once it knows who is calling.
      const access = ROUTE_ACCESS[request.routeOptions.config?.auth ?? 'admin'];
      if (access.admin || access.bot) return done();
      this.enforce(request, reply, addressKey(request.ip)).then(() => done(), done);
    });
  }

  /**
   * The route's limit, charged to the client address of a request without valid credentials. Not
   * scaled by its page: it is refused before any is read, and a single request asking for a large one
   * must not empty the bucket of everyone behind the same address.
   */
  readonly chargeAddress = (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const route = this.route(request);
    return this.enforce(request, reply, addressKey(request.ip), route && { ...route, scale: undefined });
  };

  /** The route's limit, charged to a valid token's or a live session's own bucket (`client`: `token:<id>`, `user:<username>`, `session:<id>`). */
  readonly chargeToken = (request: FastifyRequest, reply: FastifyReply, client: string): Promise<void> =>
    this.enforce(request, reply, client, this.route(request), this.tokenLimiter);

  /**
   * Charges a limit (the route's, unless another is named) to `client`; sets the headers; throws 429
   * when the bucket is short.
   */
  async enforce(
    request: FastifyRequest,
    reply: FastifyReply,
    client: string,
    route: Limit | null = this.route(request),
    limiter = this.limiter,
  ): Promise<void> {
    if (!route) return;
    const { capacity, refillPerSecond } = limiter.policy;
    // Never more than the bucket holds: a request it could never pay would be refused for good.
    const cost = route.scale ? Math.min(capacity, route.cost * route.scale(request.query as Record<string, unknown>)) : route.cost;
    let decision: Decision;
    try {
      decision = await limiter.allowN(`${route.group}:${client}`, cost);
    } catch (error) {
      this.metrics.rateLimitStoreErrors.inc();
      const failOpen = this.options.failOpen && !route.failClosed;
      request.server.throttledLog.write(
        request.log,
        'ratelimit-store',
        'warn',
        { err: error },
        `rate-limit store unavailable; failing ${failOpen ? 'open' : 'closed'}`,
      );
      if (failOpen) return;
      throw new DomainError('service_unavailable', 'Rate limiting is unavailable; try again shortly', { retryAfterSeconds: 5 });
    }
    const items = rateLimitItems(route.group, {
      quota: Math.floor(capacity / cost),
      windowSeconds: Math.ceil(capacity / refillPerSecond),
      remaining: Math.floor(decision.remaining / cost),
      nextSeconds: Math.ceil((decision.next_ms ?? 0) / 1000),
    });
    reply.header('ratelimit-policy', items.policy);
    reply.header('ratelimit', items.limit);
    if (!decision.allowed) {
      this.metrics.rateLimited.inc({ group: route.group });
      const retryAfter = Math.max(1, Math.ceil((decision.retry_after_ms ?? 0) / 1000));
      throw new DomainError('rate_limited', `Too many requests; retry in ${retryAfter} s`, {
        retryAfterSeconds: retryAfter,
        violatedPolicies: [route.group],
      });
    }
  }
}
