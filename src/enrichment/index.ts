import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
export type { BotView, BotWithSecret } from './bots.js';
import type { Config } from '../config.js';
import type { SecretBox } from '../crypto.js';
import type { Database } from '../db/index.js';
import type { EventLog } from '../events/index.js';
import type { Metrics } from '../ops/index.js';
import type { RateLimitGuard } from '../ratelimit/index.js';
import { BotAuthenticator, DatabaseNonceStore } from './bot-auth.js';
import { BotService } from './bots.js';
import { commentaryFor } from './commentary.js';
import { MatchService } from './matches.js';
import { WaitEstimate } from './estimate.js';
import { JobQueue } from './jobs.js';
import { EnrichmentRequests } from './request.js';
import { pruneEnrichments } from './retention.js';
import { enrichmentStatus } from './status.js';
import { botCheck, enrichmentRoutes } from './routes.js';
import { EnrichmentWorker } from './worker.js';

export interface EnrichmentDeps {
  config: Config;
  database: Database;
  events: EventLog;
  box: SecretBox;
  metrics: Metrics | null;
  log: FastifyBaseLogger;
}

/** Bots, matches, the signed request endpoint, the durable queue and (optionally) a worker. */
export function createEnrichment(deps: EnrichmentDeps) {
  const { config, database, events } = deps;
  const bots = new BotService(database, deps.box);
  const commentary = commentaryFor(config.enrichmentLlm);
  const matches = new MatchService(database, commentary.rule);
  // Replay protection is the database's alone, whatever REDIS_URL says (docs/enrichment.md).
  const nonces = new DatabaseNonceStore(database);
  const estimate = new WaitEstimate();
  const requests = new EnrichmentRequests(database, events, estimate, { nonces, replayRule: commentary.rule });
  const queue = new JobQueue(database, events, { leaseMs: config.enrichmentLeaseMs, retryBaseMs: config.enrichmentRetryBaseMs });
  const auth = new BotAuthenticator(bots, nonces);
  const newWorker = () => new EnrichmentWorker(database, queue, commentary, deps.log, deps.metrics, { leaseMs: config.enrichmentLeaseMs });
  const worker = config.worker === 'embedded' ? newWorker() : null;
  deps.metrics?.gauge('mothership_enrichment_queue_depth', 'Enrichment jobs queued or running', () => queue.depth());

  return {
    bots,
    matches,
    requests,
    queue,
    worker,
    newWorker,
    register(app: FastifyInstance) {
      enrichmentRoutes(app, {
        bots,
        matches,
        requests,
        status: (matchId, bot) => enrichmentStatus(database, estimate, matchId, bot),
        auth,
        onEnqueued: () => worker?.notify(),
      });
    },
    /** The bot signature check for the routes that accept bots (see http/auth.ts RouteAuth), charging `rateLimit`. */
    botCheck: (rateLimit: RateLimitGuard) => botCheck(auth, rateLimit),
    /** Retention: the enrichments finished before `cutoff` (retention.ts). */
    prune: (cutoff: string) => pruneEnrichments(database, cutoff),
    /** Periodic upkeep: forget the nonces of requests no longer fresh. */
    purgeNonces: () => nonces.purgeExpired(),
  };
}

export type Enrichment = ReturnType<typeof createEnrichment>;
