import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import { ADMIN_TOKEN, createTestEnv, eventually, startTestApp, type TestEnv } from '../helpers/app.js';
import { freePort, observer, retainedSet, startBroker } from '../helpers/broker.js';
import { admin, allEvents, post, spawnMothership, START_TIMEOUT_MS, startService, stopProcess } from '../helpers/process.js';
import { startReceiver } from '../helpers/receiver.js';

describe('the service killed with SIGKILL', () => {
  let env: TestEnv;
  before(async () => {
    env = await createTestEnv('sqlite', { WEBHOOK_RETRY_DELAY_MS: '1500', WEBHOOK_TIMEOUT_MS: '1000' });
  });
  after(() => env.cleanup());

  it('loses no acknowledged event or delivery while events flow, and delivers them after the restart', async () => {
    const receiver = await startReceiver();
    const port = await freePort();
    let service = await startService(env.env, port);
    assert.equal((await post(service.base, '/api/settings/integration', { webhook: { enabled: true, url: receiver.url } })).status, 200);
    const acknowledged = new Set<number>();
    let next = 0;
    let running = true;
    const sender = async () => {
      while (running) {
        const n = next++;
        const response = await post(service.base, '/api/events', { type: 'anomaly.detected', detail: { n } }).catch(() => null);
        if (response?.status === 202) acknowledged.add(n);
      }
    };
    const senders = Array.from({ length: 8 }, sender);
    await eventually(() => acknowledged.size >= 300, 10_000, '300 acknowledged events');
    await stopProcess(service.child, 'SIGKILL');
    running = false;
    await Promise.all(senders);

    service = await startService(env.env, port);
    try {
      const logged = (await allEvents(service.base)).filter((event) => event.event_type === 'anomaly.detected').map((event) => event.detail.n as number);
      const counts = new Map<number, number>();
      for (const n of logged) counts.set(n, (counts.get(n) ?? 0) + 1);
      for (const n of acknowledged) assert.equal(counts.get(n), 1, `acknowledged event ${n} appears ${counts.get(n) ?? 0} times`);
      assert.ok(
        [...counts.values()].every((count) => count === 1),
        'no event is doubled',
      );
      // Every logged event reaches the webhook at least once (the outbox survived the kill).
      await eventually(
        () => {
          const delivered = new Set(
            receiver.received
              .map((request) => JSON.parse(request.body))
              .filter((body) => body.event_type === 'anomaly.detected')
              .map((body) => body.detail.n),
          );
          return logged.every((n) => delivered.has(n));
        },
        20_000,
        'all logged events delivered',
      );
    } finally {
      await stopProcess(service.child);
      await receiver.close();
    }
  });

  it('sends a pending webhook retry after a restart', async () => {
    const receiver = await startReceiver();
    const port = await freePort();
    let service = await startService(env.env, port);
    try {
      await post(service.base, '/api/settings/integration', { webhook: { enabled: true, url: receiver.url } });
      receiver.received.length = 0;
      receiver.answerNext(500);
      await post(service.base, '/api/zones', { id: `retry-zone`, name: 'Retry' });
      await eventually(() => receiver.received.some((request) => request.headers['x-service-event'] === 'zone.created'), 5000, 'first attempt');
      await stopProcess(service.child, 'SIGKILL');
      service = await startService(env.env, port);
      const attempts = await eventually(
        () => {
          const matching = receiver.received.filter((request) => request.headers['x-service-event'] === 'zone.created');
          return matching.length >= 2 ? matching : null;
        },
        10_000,
        'retry after restart',
      );
      assert.equal(attempts[0]!.headers['webhook-id'], attempts[1]!.headers['webhook-id']);
    } finally {
      await stopProcess(service.child);
      await receiver.close();
    }
  });
});

describe('graceful shutdown on SIGTERM', () => {
  it('finishes in-flight requests, publishes offline, and exits 0', async () => {
    const broker = await startBroker();
    const env = await createTestEnv('sqlite', { WEBHOOK_TIMEOUT_MS: '5000' });
    const slow = await startReceiver((response) => setTimeout(() => response.end('late but fine'), 1000));
    try {
      const port = await freePort();
      const service = await startService(env.env, port);
      await post(service.base, '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url } });
      const availability = `mothership/${env.env.MOTHERSHIP_ID}/availability`;
      const view = await observer(broker.url, [availability]);
      await eventually(() => view.last(availability) === 'online', 5000, 'online');
      // An in-flight request: the webhook test waits a second for the slow receiver.
      const inFlight = post(service.base, '/api/settings/integration/test', { target: 'webhook', webhook: { url: slow.url } });
      await eventually(() => slow.received.length === 1, 5000, 'the slow request to start');
      service.child.kill('SIGTERM');
      const response = await inFlight;
      assert.equal(response.status, 200);
      assert.equal(((await response.json()) as { webhook: { ok: boolean } }).webhook.ok, true);
      const code = await new Promise((resolve) => (service.child.exitCode !== null ? resolve(service.child.exitCode) : service.child.once('exit', resolve)));
      assert.equal(code, 0, service.child.output());
      await eventually(() => view.last(availability) === 'offline', 5000, 'offline');
      assert.equal((await retainedSet(broker.url, [availability])).get(availability), 'offline');
      // Said by the service itself, then a clean DISCONNECT: not the Last Will of a process that just died.
      assert.match(broker.output(), new RegExp(`Client mothership-${env.env.MOTHERSHIP_ID} disconnected\\.`), 'a clean MQTT disconnect');
      await view.close();
      assert.equal(
        await fetch(`${service.base}/healthz`).then(
          () => 'answered',
          () => 'refused',
        ),
        'refused',
      );
    } finally {
      await slow.close();
      await env.cleanup();
      await broker.destroy();
    }
  });

  it('ends open event streams: a dashboard left open does not hold the shutdown', async () => {
    const env = await createTestEnv('sqlite');
    const service = await startService(env.env, await freePort());
    try {
      const streams = await Promise.all(Array.from({ length: 3 }, () => fetch(`${service.base}/api/events/stream`, { headers: admin })));
      const ended = streams.map(async (stream) => {
        const reader = stream.body!.getReader();
        while (!(await reader.read().catch(() => ({ done: true }))).done);
      });
      const started = Date.now();
      service.child.kill('SIGTERM');
      const code = await Promise.race([
        new Promise((resolve) => (service.child.exitCode !== null ? resolve(service.child.exitCode) : service.child.once('exit', resolve))),
        new Promise((resolve) => setTimeout(() => resolve('still running after 5 s'), 5000)),
      ]);
      assert.equal(code, 0, service.child.output());
      assert.ok(Date.now() - started < 5000);
      await Promise.all(ended); // each client saw its stream end (a browser then reconnects)
    } finally {
      await stopProcess(service.child, 'SIGKILL');
      await env.cleanup();
    }
  });

  it('a second signal exits at once', async () => {
    const env = await createTestEnv('sqlite');
    const slow = await startReceiver((response) => setTimeout(() => response.end('late'), 10_000));
    const service = await startService({ ...env.env, WEBHOOK_TIMEOUT_MS: '20000' }, await freePort());
    try {
      // A request that holds the graceful shutdown for 10 s.
      void post(service.base, '/api/settings/integration/test', { target: 'webhook', webhook: { url: slow.url } }).catch(() => null);
      await eventually(() => slow.received.length === 1, 5000, 'the slow request to start');
      const exited = new Promise((resolve) => service.child.once('exit', (code) => resolve(code)));
      service.child.kill('SIGTERM');
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(service.child.exitCode, null, 'the first signal waits for the request');
      service.child.kill('SIGTERM');
      const code = await Promise.race([exited, new Promise((resolve) => setTimeout(() => resolve('still running'), 2000))]);
      assert.equal(code, 1);
    } finally {
      await stopProcess(service.child, 'SIGKILL');
      await slow.close();
      await env.cleanup();
    }
  });

  it('a request answered during the shutdown closes its keep-alive connection, so the close does not wait for the client', async () => {
    const slow = await startReceiver((response) => setTimeout(() => response.end('late'), 500));
    const app = await startTestApp('sqlite', { WEBHOOK_TIMEOUT_MS: '5000' });
    const base = await app.http.listen({ port: 0, host: '127.0.0.1' });
    // A client that keeps connections open as long as the server's Keep-Alive allows (72 s).
    const agent = new http.Agent({ keepAlive: true, keepAliveMsecs: 60_000 });
    try {
      const answered = new Promise<http.IncomingMessage>((resolve, reject) => {
        const request = http.request(
          `${base}/api/settings/integration/test`,
          { method: 'POST', agent, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' } },
          (response) => {
            response.resume();
            response.on('end', () => resolve(response));
          },
        );
        request.on('error', reject);
        request.end(JSON.stringify({ target: 'webhook', webhook: { url: slow.url } }));
      });
      await eventually(() => slow.received.length === 1, 5000, 'the slow request to start');
      const started = Date.now();
      const closed = app.cleanup();
      const response = await answered;
      assert.equal(response.statusCode, 200);
      assert.equal(response.headers.connection, 'close');
      await Promise.race([closed, new Promise((_resolve, reject) => setTimeout(() => reject(new Error('the close waited for the idle connection')), 4000))]);
      assert.ok(Date.now() - started < 4000);
    } finally {
      agent.destroy();
      await slow.close();
    }
  });
});

describe('one serving process per SQLite DATA_DIR (outside review: a second took MQTT over from the first)', () => {
  it('a second serve is refused in one sentence (exit 2), started at once or later; the lock ends with the process, however it ends', async () => {
    const env = await createTestEnv('sqlite');
    const [firstPort, secondPort, laterPort] = [await freePort(), await freePort(), await freePort()];
    const started = [firstPort, secondPort].map((port) => spawnMothership(['serve'], { ...env.env, PORT: String(port) }));
    try {
      // At once on a new directory: one serves, the other refuses before it touches the database.
      const refused = await Promise.race([
        ...started.map((child) => once(child, 'exit').then(() => child)),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('both serve: neither was refused')), START_TIMEOUT_MS).unref()),
      ]);
      const serving = started.find((child) => child !== refused)!;
      assert.equal(refused.exitCode, 2, refused.output());
      assert.match(refused.output(), /Another mothership serve is running on DATA_DIR .*: SQLite is one process/);
      assert.doesNotMatch(refused.output(), /\n\s+at /, 'no stack trace');
      const servingBase = `http://127.0.0.1:${serving === started[0] ? firstPort : secondPort}`;
      await eventually(
        () =>
          fetch(`${servingBase}/readyz`).then(
            (response) => response.ok,
            () => false,
          ),
        START_TIMEOUT_MS,
        'the other serves',
      );
      const later = spawnMothership(['serve'], { ...env.env, PORT: String(laterPort) });
      await once(later, 'exit');
      assert.equal(later.exitCode, 2, later.output());
      // The lock is private like the rest of DATA_DIR, and leaves no journal beside it.
      assert.equal(statSync(path.join(env.env.DATA_DIR!, 'serve.lock')).mode & 0o777, 0o600);
      assert.ok(!existsSync(path.join(env.env.DATA_DIR!, 'serve.lock-journal')), 'no serve.lock-journal');
      // SIGKILL leaves no lock behind: the next start serves.
      await stopProcess(serving, 'SIGKILL');
      const { child } = await startService(env.env, laterPort);
      await stopProcess(child);
    } finally {
      for (const child of started) await stopProcess(child, 'SIGKILL');
      await env.cleanup();
    }
  });
});
