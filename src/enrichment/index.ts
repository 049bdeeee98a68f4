import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Config } from '../config.js';
import type { SecretBox } from '../crypto.js';
import type { Database } from '../db/index.js';
import type { EventLog } from '../events/index.js';
import type { Metrics } from '../ops/metrics.js';
import type { RateLimitGuard } from '../ratelimit/index.js';
import { BotAuthenticator, DatabaseNonceStore, RedisNonceStore } from './bot-auth.js';
import { BotService } from './bots.js';
import { builtInCommentary, llmCommentary, replayRule, type CommentaryGenerator } from './commentary.js';
import { MatchService } from './matches.js';
import { EnrichmentQueue } from './queue.js';
import { botCheck, enrichmentRoutes } from './routes.js';
import { EnrichmentWorker } from './worker.js';

export { EnrichmentWorker } from './worker.js';

export interface EnrichmentDeps {
  config: Config;
  database: Database;
  events: EventLog;
  box: SecretBox;
  redis: Redis | null;
  metrics: Metrics | null;
  log: FastifyBaseLogger;
}

export function commentaryGenerator(config: Config): CommentaryGenerator {
  return config.enrichmentLlm ? llmCommentary(config.enrichmentLlm) : async (replay, matchId) => builtInCommentary(replay, matchId);
}

const nonceKeyPrefix = (config: Pick<Config, 'redisPrefix'>) => config.redisPrefix + 'nonce:';

/** Where bot nonces are kept, which every instance on one database must share (named without credentials). */
export function nonceStoreName(config: Pick<Config, 'redisUrl' | 'redisPrefix'>): string {
  if (!config.redisUrl) return 'the database';
  const url = new URL(config.redisUrl);
  return `Redis ${url.hostname}:${url.port || '6379'}${url.pathname.length > 1 ? url.pathname : '/0'} under "${nonceKeyPrefix(config)}"`;
}

/** Bots, matches, the signed request endpoint, the durable queue and (optionally) a worker. */
export function createEnrichment(deps: EnrichmentDeps) {
  const { config, database, events } = deps;
  const bots = new BotService(database, deps.box);
  const matches = new MatchService(database, replayRule(Boolean(config.enrichmentLlm)));
  const databaseNonces = deps.redis ? null : new DatabaseNonceStore(database);
  const queue = new EnrichmentQueue(database, events, { leaseMs: config.enrichmentLeaseMs, retryBaseMs: config.enrichmentRetryBaseMs, nonces: databaseNonces });
  const nonces = deps.redis ? new RedisNonceStore(deps.redis, nonceKeyPrefix(config)) : databaseNonces!;
  const auth = new BotAuthenticator(bots, nonces);
  const newWorker = () => new EnrichmentWorker(queue, commentaryGenerator(config), deps.log, deps.metrics, { leaseMs: config.enrichmentLeaseMs });
  const worker = config.worker === 'embedded' ? newWorker() : null;
  deps.metrics?.gauge('mothership_enrichment_queue_depth', 'Enrichment jobs queued or running', () => queue.depth());

  return {
    bots,
    matches,
    queue,
    worker,
    newWorker,
    register(app: FastifyInstance) {
      enrichmentRoutes(app, { bots, matches, queue, auth, onEnqueued: () => worker?.notify() });
    },
    /** The bot signature check for the routes that accept bots (see http/auth.ts RouteAuth), charging `rateLimit`. */
    botCheck: (rateLimit: RateLimitGuard) => botCheck(auth, rateLimit, { nonceWithRequest: databaseNonces !== null }),
    /** Periodic upkeep: forget expired nonces (the Redis store expires its own). */
    purgeNonces: () => databaseNonces?.purgeExpired() ?? Promise.resolve(),
  };
}

export type Enrichment = ReturnType<typeof createEnrichment>;
