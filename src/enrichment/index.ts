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
import { builtInCommentary, llmCommentary, type CommentaryGenerator } from './commentary.js';
import { MatchService } from './matches.js';
import { EnrichmentQueue } from './queue.js';
import { enrichmentRoutes } from './routes.js';
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

/** Bots, matches, the signed request endpoint, the durable queue and (optionally) a worker. */
export function createEnrichment(deps: EnrichmentDeps) {
  const { config, database, events } = deps;
  const bots = new BotService(database, deps.box);
  const matches = new MatchService(database);
  const databaseNonces = deps.redis ? null : new DatabaseNonceStore(database);
  const queue = new EnrichmentQueue(database, events, { leaseMs: config.enrichmentLeaseMs, retryBaseMs: config.enrichmentRetryBaseMs, nonces: databaseNonces });
  const nonces = deps.redis ? new RedisNonceStore(deps.redis, config.redisPrefix + 'nonce:') : databaseNonces!;
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
    register(app: FastifyInstance, rateLimit: RateLimitGuard) {
      enrichmentRoutes(app, { bots, matches, queue, auth, rateLimit, onEnqueued: () => worker?.notify(), nonceWithRequest: databaseNonces !== null });
    },
    /** Periodic upkeep: forget expired nonces (the Redis store expires its own). */
    purgeNonces: () => databaseNonces?.purgeExpired() ?? Promise.resolve(),
  };
}

export type Enrichment = ReturnType<typeof createEnrichment>;
