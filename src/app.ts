import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { ConfigError, type Config } from './config.js';
import { createEventPipeline } from './pipeline.js';
import { VERSION } from './version.js';
import { claimInterval, PollGate } from './db/index.js';
import { EVENT_LOG, eventRoutes } from './events/index.js';
import { createHttpServer, RouteAuth, SessionStore, SIGN_IN_LIMIT } from './http/index.js';
import {
  applyRetention,
  checkClock,
  CLOCK_CHECK_MS,
  openInstallation,
  Metrics,
  missingRedisDatabase,
  opsRoutes,
  redisProbe,
  redisUnreachable,
  requestMetrics,
  RETENTION_INTERVAL_MS,
  serviceTarget,
} from './ops/index.js';
import { StorageBudget } from './storage-budget.js';
import { PresenceService, awaySweepIntervalMs, nodeSweepIntervalMs, presenceRoutes } from './presence/index.js';
import { BaselineService, baselineRoutes } from './baselines/index.js';
import { dashboardRoutes } from './dashboard/index.js';
import { createEnrichment } from './enrichment/index.js';
import { MqttIntegration, MqttLeadership } from './mqtt/index.js';
import { settingsRoutes, type SettingsChange } from './settings/index.js';
import { FINISHED_DELIVERY_LOGS, OutboxBound, WebhookService, webhookRoutes } from './webhook/index.js';
import { MemoryStore, RateLimitGuard, RateLimiter, REDIS_COMMAND_TIMEOUT_MS, RedisStore, TOKEN_POLICY, type RateLimitStore } from './ratelimit/index.js';
import { ApiTokenStore, tokenRoutes } from './tokens/index.js';
import { sessionRoutes, UserStore, userRoutes } from './users/index.js';
import { pollEvery, type Poller } from './ticks.js';

export type App = Awaited<ReturnType<typeof buildApp>>;

const REDIS_STARTUP_WAIT_MS = 5000;

/** Gives Redis a moment at start-up, so the first requests are limited rather than failing open. */
async function waitForRedis(redis: Redis): Promise<void> {
  if (redis.status === 'ready') return;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, REDIS_STARTUP_WAIT_MS);
    redis.once('ready', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** The database and what keeps its size: the outbox bound, the storage budget; the event pipeline writing through them. */
async function openStorage(config: Config) {
  const { database, box, warnings: installationWarnings } = await openInstallation(config, { serving: true });
  const metrics = new Metrics();
  const outboxBound = new OutboxBound(database, config.webhookPendingMax, metrics);
  const budget =
    config.storageBudgetMb > 0
      ? new StorageBudget(database, config.storageBudgetMb * 2 ** 20, [EVENT_LOG, ...FINISHED_DELIVERY_LOGS], (limit) => outboxBound.makeRoom(limit))
      : null;
  const { events, settings, outbox } = createEventPipeline(database, box, budget ? [budget] : []);
  events.subscribe((event) => metrics.events.inc({ event_type: event.payload.event_type }));
  return { database, metrics, box, installationWarnings, outboxBound, budget, events, settings, outbox };
}
type Storage = Awaited<ReturnType<typeof openStorage>>;

/**
 * The rate limit, its buckets in Redis when configured (ioredis is loaded only then: a start-up without
 * Redis does not pay for importing it). Commands fail at once while Redis is away (no offline queue),
 * and after REDIS_COMMAND_TIMEOUT_MS while it holds the connection without answering, so the limiter
 * can fail open or closed promptly. `logTo` reports Redis's errors once the logger exists.
 */
async function openRateLimit(config: Config, { database, metrics }: Storage) {
  const url = config.redisUrl;
  const redis = url
    ? new (await import('ioredis')).Redis(url, {
        enableOfflineQueue: false,
        maxRetriesPerRequest: 1,
        lazyConnect: false,
        commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
      })
    : null;
  let redisError: unknown = null;
  const keepRedisError = (error: unknown) => (redisError = error);
  redis?.on('error', keepRedisError);
  if (redis) {
    await waitForRedis(redis);
    const missing = await missingRedisDatabase(redis, url!);
    if (missing) {
      redis.disconnect();
      await database.close();
      throw new ConfigError(missing);
    }
  }
  const store: RateLimitStore = redis ? new RedisStore(redis, config.redisPrefix + 'rl:') : new MemoryStore();
  const limiter = new RateLimiter(store, { capacity: config.rateLimit.capacity, refillPerSecond: config.rateLimit.refillPerSecond });
  const tokenLimiter = new RateLimiter(store, {
    capacity: Math.max(TOKEN_POLICY.capacity, config.rateLimit.capacity),
    refillPerSecond: Math.max(TOKEN_POLICY.refillPerSecond, config.rateLimit.refillPerSecond),
  });
  const rateLimit = new RateLimitGuard(limiter, tokenLimiter, metrics, { failOpen: config.rateLimit.failOpen, costs: config.rateLimit.costs });
  // Where Redis is and why it does not answer (ioredis's own errors never name the address): at
  // start, then a line a minute per reason while it stays away.
  const logTo = (http: FastifyInstance) => {
    if (!redis) return;
    const report = (error: unknown) =>
      http.throttledLog.write(http.log, 'redis', 'warn', { code: (error as { code?: string } | null)?.code }, redisUnreachable(error, url!));
    redis.off('error', keepRedisError).on('error', report);
    if (redis.status !== 'ready') report(redisError);
  };
  return { redis, rateLimit, logTo };
}

/** The HTTP server with its request metrics and rate limit, and the start-up lines its logger writes. */
async function openHttp(config: Config, storage: Storage, rateLimit: RateLimitGuard, logRedis: (http: FastifyInstance) => void): Promise<FastifyInstance> {
  const { database, metrics, installationWarnings } = storage;
  const { logLevel, logFormat, trustProxy, corsOrigins, httpRequestTimeoutMs: requestTimeoutMs, httpConnectionsPerAddress: connectionsPerAddress } = config;
  const http = await createHttpServer({ logLevel, logFormat, trustProxy, version: VERSION, corsOrigins, requestTimeoutMs, connectionsPerAddress });
  requestMetrics(http, metrics.http);
  rateLimit.register(http);
  const migrated = database.migrationReport();
  if (migrated) http.log.info(migrated);
  logRedis(http);
  for (const warning of installationWarnings) http.log.warn(warning);
  const checkpointer = database.checkpointer;
  if (checkpointer) {
    // It fails every tick while the disk is full: a line a minute per code.
    checkpointer.onFailure((failure) =>
      http.throttledLog.write(
        http.log,
        `checkpoint:${failure.code}`,
        'error',
        { code: failure.code, reason: failure.message },
        'SQLite WAL checkpoint failed (the writer checkpoints for itself once the WAL reaches its limit)',
      ),
    );
    metrics.counter(
      'mothership_sqlite_checkpoint_failures_total',
      'WAL checkpoints the checkpointer thread could not run',
      () => checkpointer.stats().failures,
    );
    metrics.gauge(
      'mothership_sqlite_checkpoint_seconds',
      'Duration of the last WAL checkpoint on the checkpointer thread',
      async () => checkpointer.stats().lastSeconds,
    );
  }
  return http;
}

/** The capabilities behind the routes, and the route auth that admits requests to them; with what they were built from. */
async function buildCapabilities(config: Config, opened: Storage & { redis: Redis | null; rateLimit: RateLimitGuard; http: FastifyInstance }) {
  const { database, box, events, metrics, settings, outbox, budget, http, rateLimit } = opened;
  const { presenceAwayDelayMs: awayDelayMs, nodeTimeoutMs, recordLimits: limits } = config;
  const presence = new PresenceService(database, events, { awayDelayMs, nodeTimeoutMs, limits });
  const log = http.throttledLog.background(http.log);
  const sessions = new SessionStore(database, config.adminToken, config.secretsKey);
  const enrichment = createEnrichment({ config, database, events, box, metrics, log });
  const tokens = new ApiTokenStore(database);
  const users = new UserStore(database);
  await new RouteAuth(config.adminToken, sessions, {
    chargeSignIn: rateLimit.addressCharge(SIGN_IN_LIMIT),
    chargeAddress: rateLimit.chargeAddress,
    chargeToken: rateLimit.chargeToken,
    authenticateBot: enrichment.botCheck(rateLimit),
    resolveToken: (token) => tokens.resolve(token),
    verifyUser: (username, password) => users.verify(username, password),
  }).register(http);
  const webhook = new WebhookService(database, events, outbox, settings, log, http.throttledLog, metrics, {
    timeoutMs: config.webhookTimeoutMs,
    retryDelayMs: config.webhookRetryDelayMs,
    stored: budget ? (payloads) => budget.stored(payloads) : undefined,
  });
  metrics.gauge('mothership_webhook_backlog', 'Webhook deliveries waiting to be sent', () => webhook.backlog());
  if (budget) {
    metrics.gauge('mothership_storage_bytes', 'Bytes the storage budget counts (STORAGE_BUDGET_MB), at its last measurement', async () => budget.used);
    metrics.gauge('mothership_storage_budget_bytes', 'The storage budget (STORAGE_BUDGET_MB), in bytes', async () => config.storageBudgetMb * 2 ** 20);
  }
  // Several instances on one PostgreSQL database: one MQTT owner, elected in the database.
  const leadership = config.databaseUrl ? new MqttLeadership(config.databaseUrl, config.mothershipId, http.log, { timeoutMs: config.databaseTimeoutMs }) : null;
  metrics.gauge('mothership_mqtt_owner', 'Whether this instance owns the MQTT connection (1) or stands by for another instance (0)', async () =>
    (leadership?.leader ?? true) ? 1 : 0,
  );
  const mqtt = new MqttIntegration({
    database,
    ownership: leadership,
    presence,
    events,
    mothershipId: config.mothershipId,
    backoff: { initialMs: config.mqttBackoffInitialMs, maxMs: config.mqttBackoffMaxMs, takeover: config.mqttTakeover },
    birthDelayMaxMs: config.mqttBirthDelayMaxMs,
    metrics,
    log: http.log,
    savedSettings: async () => (await settings.get()).mqtt,
    throttledLog: http.throttledLog,
  });
  return { ...opened, presence, log, sessions, enrichment, tokens, users, webhook, leadership, mqtt };
}
type Wired = Awaited<ReturnType<typeof buildCapabilities>>;

function registerRoutes(config: Config, wired: Wired): void {
  const { http, database, metrics, events, settings, presence, redis, mqtt, webhook, tokens, users, sessions, enrichment } = wired;
  opsRoutes(http, {
    database,
    metrics,
    mqttState: () => mqtt.status(),
    // Every instance shares Redis: with a rate limit that fails open, taking them all out of a load
    // balancer while it is away would turn a limit that lets requests through into an outage.
    dependencies: redis
      ? [
          {
            name: 'redis',
            required: !config.rateLimit.failOpen,
            probe: () => redisProbe(redis, config.redisUrl!),
            where: serviceTarget(config.redisUrl!, 6379, '/0'),
          },
        ]
      : [],
  });
  presenceRoutes(http, presence);
  eventRoutes(http, events, metrics, config.eventStreams);
  baselineRoutes(http, new BaselineService(database, events, { limitBytes: config.baselineStorageMb * 2 ** 20, log: http.log }));
  settingsRoutes(http, { store: settings, mqtt, webhook });
  webhookRoutes(http, webhook);
  tokenRoutes(http, tokens);
  userRoutes(http, users);
  sessionRoutes(http, sessions, users);
  dashboardRoutes(http);
  enrichment.register(http);
}

/** The periodic tasks, as a part: `start` sets their intervals, `stop` clears them. */
function timers(config: Config, { database, events, presence, log, enrichment, sessions, webhook, metrics }: Wired) {
  const pollers: Poller[] = [];
  let clockOffsetMs: number | null = null;
  if (database.dialect === 'postgres')
    metrics.gauge('mothership_clock_offset_seconds', "How far this instance's clock is ahead of the database server's (negative: behind)", async () =>
      clockOffsetMs === null ? Number.NaN : clockOffsetMs / 1000,
    );
  const every = (ms: number, task: () => Promise<unknown>, what: string, { atOnce = false } = {}) => {
    const poller = pollEvery(ms, () => task().catch((error: Error) => log.warn({ err: error }, `${what} failed`)));
    pollers.push(poller);
    if (atOnce) poller.run();
  };
  /** A sweep that runs only after a commit or once `nextDue` (what it reads, in ms) has come: an idle service reads nothing. */
  const gated = ({ sweep, nextDue }: { sweep: () => Promise<unknown>; nextDue: () => Promise<number> }) => {
    const gate = new PollGate(database);
    return async () => {
      if (!gate.due()) return;
      await sweep();
      await gate.quietUntilNext(nextDue);
    };
  };
  const retention = async () => {
    const deleted = await applyRetention([
      { name: 'events', days: config.eventRetentionDays, prune: (cutoff) => events.prune(cutoff) },
      { name: 'webhook_deliveries', days: config.webhookLogRetentionDays, prune: (cutoff) => webhook.prune(cutoff) },
      { name: 'enrichments', days: config.enrichmentRetentionDays, prune: (cutoff) => enrichment.prune(cutoff) },
    ]);
    if (Object.values(deleted).some(Boolean)) log.info({ deleted }, 'retention: expired rows deleted');
  };
  return {
    start: () => {
      every(awaySweepIntervalMs(config.presenceAwayDelayMs), gated({ sweep: () => presence.sweepAway(), nextDue: () => presence.nextAwayDue() }), 'away sweep');
      every(
        nodeSweepIntervalMs(config.nodeTimeoutMs),
        gated({ sweep: () => presence.sweepOfflineNodes(), nextDue: () => presence.nextNodeTimeout() }),
        'node timeout sweep',
      );
      // One health report per interval for the installation, whichever instance's tick comes first.
      every(config.healthIntervalMs, async () => (await claimInterval(database, 'health', config.healthIntervalMs)) && presence.emitHealth(), 'health report');
      every(60_000, () => enrichment.purgeNonces(), 'nonce purge');
      every(60_000, () => sessions.purge(), 'session purge');
      every(RETENTION_INTERVAL_MS, retention, 'retention', { atOnce: true });
      if (database.dialect === 'postgres')
        every(CLOCK_CHECK_MS, async () => (clockOffsetMs = await checkClock(database, log)), 'clock check', { atOnce: true });
    },
    // A run in progress ends before the database closes.
    stop: async () => void (await Promise.all(pollers.splice(0).map((poller) => poller.stop()))),
  };
}

/** Starts the parts with a lifetime, and closes the service: the HTTP server, the metrics' sampler, the parts, the database, Redis. */
function lifecycle(config: Config, wired: Wired) {
  const { http, database, redis, settings, outboxBound, budget, log, webhook, leadership, mqtt, enrichment, metrics } = wired;
  // Only a change of MQTT's own fields touches the connection: a webhook save must not make Home
  // Assistant see every entity go unavailable and come back.
  const applySettings = ({ settings: next, changed }: SettingsChange) => {
    if (changed.mqtt.length > 0 && (leadership?.leader ?? true))
      void mqtt.configure(next.mqtt).catch((error: Error) => http.log.error({ err: error }, 'MQTT reconfiguration failed'));
  };
  // Every part with a lifetime, in the order it starts; close() stops them in reverse, after the
  // HTTP server has stopped taking requests. Constructors only assign: a part subscribes to the bus
  // and starts its timers here, and undoes both in stop (as Zigbee2MQTT's extensions do).
  const parts: { start(): Promise<void> | void; stop(): Promise<void> | void }[] = [
    {
      start: async () => {
        settings.on('change', applySettings);
        const initial = await settings.start();
        if (!leadership) return mqtt.start(initial.mqtt);
        await leadership.start(async (leader) => (leader ? mqtt.start((await settings.get()).mqtt) : mqtt.stop({ offline: false })));
      },
      stop: async () => {
        await settings.stop();
        settings.off('change', applySettings);
        // MQTT first: its `offline` must come before another instance's `online`.
        await mqtt.stop();
        await leadership?.stop();
      },
    },
    { start: () => outboxBound.start(log, http.throttledLog), stop: () => outboxBound.stop() },
    { start: () => budget?.start(log, http.throttledLog), stop: () => budget?.stop() },
    { start: () => webhook.start(), stop: () => webhook.stop() },
    timers(config, wired),
    { start: () => enrichment.worker?.start(), stop: () => enrichment.worker?.stop() },
  ];
  return {
    /** Starts background work (timers, integrations); `listen` is separate so tests can use inject(). */
    async start() {
      for (const part of parts) await part.start();
    },
    async close() {
      await http.close();
      metrics.close();
      for (const part of [...parts].reverse()) await part.stop();
      await database.close();
      redis?.disconnect();
    },
  };
}

/** The composition root: builds every part from the config and wires them to the event bus. */
export async function buildApp(config: Config) {
  const storage = await openStorage(config);
  const { redis, rateLimit, logTo } = await openRateLimit(config, storage);
  const http = await openHttp(config, storage, rateLimit, logTo);
  const wired = await buildCapabilities(config, { ...storage, redis, rateLimit, http });
  registerRoutes(config, wired);
  const { database, events, presence, metrics, box, enrichment, settings, webhook, mqtt } = wired;
  return { http, database, events, presence, metrics, redis, rateLimit, box, enrichment, settings, webhook, mqtt, ...lifecycle(config, wired) };
}
