import type { FastifyInstance } from 'fastify';
import type { Database } from '../db/index.js';
import type { Metrics } from './metrics.js';

/** Liveness, readiness and Prometheus metrics (CONTRACT section 10). */
export function opsRoutes(app: FastifyInstance, deps: { database: Database; metrics: Metrics; mqttState: () => { connected: boolean; enabled: boolean; last_error: string | null } }): void {
  app.get('/healthz', { config: { rateLimit: false }, schema: { tags: ['operations'], summary: 'The process is up' } }, async () => ({ status: 'ok' }));

  app.get('/readyz', { config: { rateLimit: false }, schema: { tags: ['operations'], summary: 'The database is reachable; MQTT state is reported, not required' } }, async (_request, reply) => {
    let database = 'ok';
    try {
      await deps.database.ping();
    } catch (error) {
      database = (error as Error).message;
    }
    const ready = database === 'ok';
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', database, mqtt: deps.mqttState() });
  });

  app.get('/metrics', { config: { rateLimit: false }, schema: { tags: ['operations'], summary: 'Prometheus metrics' } }, async (_request, reply) =>
    reply.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics()),
  );
}
