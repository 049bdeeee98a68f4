import type { FastifyInstance } from 'fastify';
import { SCHEMA_VERSION, type Database } from '../db/index.js';
import { VERSION } from '../version.js';
import type { Metrics } from './metrics.js';

/** A backing service readiness probes (Redis when configured). */
export interface Dependency {
  /** Its field in the readiness `checks`. */
  name: string;
  /** Whether requests fail without it, so that the instance is not ready: otherwise it is only reported. */
  required: boolean;
  /** Resolves when it answers. */
  probe: () => Promise<unknown>;
  /** What the log line names when it does not answer (an address, never credentials). */
  where?: string;
}

/** A probe that has not answered by then counts as unreachable, so a probe never hangs on a silent host. */
const PROBE_TIMEOUT_MS = 2000;

function answersInTime(probe: () => Promise<unknown>): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`)), PROBE_TIMEOUT_MS);
  });
  return Promise.race([probe(), timeout]).finally(() => clearTimeout(timer));
}

/**
 * Liveness (process up), readiness (every dependency whose failure fails requests: the database, its
 * writes, Redis when the rate limit fails closed without it; MQTT and a Redis the limit fails open
 * without reported, not required) and Prometheus metrics.
 */
export function opsRoutes(
  app: FastifyInstance,
  deps: {
    database: Database;
    metrics: Metrics;
    mqttState: () => { connected: boolean; enabled: boolean; last_error: string | null };
    dependencies?: Dependency[];
  },
): void {
  app.get(
    '/healthz',
    {
      config: { rateLimit: false },
      schema: {
        operationId: 'getLiveness',
        tags: ['operations'],
        summary: 'The process is up',
        response: { 200: { type: 'object', properties: { status: { type: 'string', const: 'ok' } } } },
      },
    },
    async () => ({ status: 'ok' }),
  );

  const readiness = {
    type: 'object',
    properties: {
      status: { type: 'string', enum: ['ready', 'not_ready'] },
      version: { type: 'string', description: "This instance's release (package.json version)" },
      schema: { type: 'string', description: 'The database schema this instance runs: the newest migration it applied' },
      database: { type: 'string', description: '"ok", or why the database is not reachable' },
      checks: {
        type: 'object',
        description:
          'Each dependency: "ok" or why not in words. `database` ("unreachable"), `disk` (the database\'s writes: "disk full", "disk I/O error", "out of resources"), `redis` when configured ("unreachable"; not ready for it only with RATE_LIMIT_REDIS_FAILURE=closed)',
        additionalProperties: { type: 'string' },
      },
      mqtt: {
        type: 'object',
        additionalProperties: true,
        properties: { enabled: { type: 'boolean' }, connected: { type: 'boolean' }, last_error: { type: ['string', 'null'] } },
      },
    },
  } as const;
  app.get(
    '/readyz',
    {
      config: { rateLimit: false },
      schema: {
        operationId: 'getReadiness',
        tags: ['operations'],
        summary:
          'Every dependency requests need works (database, disk, Redis when the rate limit fails closed without it); MQTT state is reported, not required',
        response: { 200: readiness, 503: readiness },
      },
    },
    async (request, reply) => {
      const probes: Dependency[] = [{ name: 'database', required: true, probe: () => deps.database.ping() }, ...(deps.dependencies ?? [])];
      const checks: Record<string, string> = Object.fromEntries(probes.map(({ name }) => [name, 'ok']));
      await Promise.all(
        probes.map(async ({ name, probe, where }) => {
          try {
            await answersInTime(probe);
          } catch (error) {
            // The cause goes to the log: this route is public, and a driver's message can name hosts and users.
            // It is public and not rate limited too: a line a minute, not one per probe.
            request.server.throttledLog.write(request.log, `readyz:${name}`, 'warn', { err: error, where }, `readiness: ${name} unreachable`);
            checks[name] = 'unreachable';
          }
        }),
      );
      checks.disk = deps.database.writeState();
      const ready = checks.disk === 'ok' && probes.every(({ name, required }) => !required || checks[name] === 'ok');
      return reply
        .code(ready ? 200 : 503)
        .send({ status: ready ? 'ready' : 'not_ready', version: VERSION, schema: SCHEMA_VERSION, database: checks.database, checks, mqtt: deps.mqttState() });
    },
  );

  app.get(
    '/metrics',
    {
      config: { rateLimit: false },
      schema: {
        operationId: 'getMetrics',
        tags: ['operations'],
        summary: 'Prometheus metrics',
        response: { 200: { description: 'Prometheus text exposition format 0.0.4', content: { 'text/plain': { schema: { type: 'string' } } } } },
      },
    },
    async (_request, reply) => reply.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics()),
  );
}
