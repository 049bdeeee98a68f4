import type { FastifyInstance } from 'fastify';

/** How long a shutdown lets running requests finish before it closes their connections. */
const SHUTDOWN_DRAIN_MS = 8000;

/**
 * Shutdown: close waits for every connection. Requests still running are answered with
 * `Connection: close`, so their keep-alive connections end with them (a client honouring our
 * `Keep-Alive: timeout=72` would otherwise hold one for a minute), and whatever still runs after
 * SHUTDOWN_DRAIN_MS is cut, so closing always ends.
 */
export function shutdownDrain(app: FastifyInstance): void {
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
}
