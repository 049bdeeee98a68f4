import type { FastifyInstance } from 'fastify';
import { SCHEMA_VERSION, type Database } from '../db/index.js';
import { VERSION } from '../version.js';
import type { Metrics } from './metrics.js';

/** Liveness (process up), readiness (database reachable; MQTT reported, not required) and Prometheus metrics. */
export function opsRoutes(
  app: FastifyInstance,
  deps: { database: Database; metrics: Metrics; mqttState: () => { connected: boolean; enabled: boolean; last_error: string | null } },
): void {
  app.get(
    '/healthz',
    {
      config: { rateLimit: false },
      schema: {
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
        tags: ['operations'],
        summary: 'The database is reachable; MQTT state is reported, not required',
        response: { 200: readiness, 503: readiness },
      },
    },
    async (request, reply) => {
      let database = 'ok';
      try {
        await deps.database.ping();
      } catch (error) {
        // The cause goes to the log: this route is public, and a driver's message can name hosts and users.
        // It is public and not rate limited too: a line a minute, not one per probe.
        request.server.throttledLog.write(request.log, 'readyz', 'warn', { err: error }, 'readiness: database unreachable');
        database = 'unreachable';
      }
      const ready = database === 'ok';
      return reply
        .code(ready ? 200 : 503)
        .send({ status: ready ? 'ready' : 'not_ready', version: VERSION, schema: SCHEMA_VERSION, database, mqtt: deps.mqttState() });
    },
  );

  app.get(
    '/metrics',
    {
      config: { rateLimit: false },
      schema: {
        tags: ['operations'],
        summary: 'Prometheus metrics',
        response: { 200: { description: 'Prometheus text exposition format 0.0.4', content: { 'text/plain': { schema: { type: 'string' } } } } },
      },
    },
    async (_request, reply) => reply.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics()),
  );
}
