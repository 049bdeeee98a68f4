import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import autocannon from 'autocannon';
import { ADMIN_TOKEN, createTestEnv, eventually } from '../helpers/app.js';
import { connect } from 'node:net';
import { freePort, startBroker } from '../helpers/broker.js';
import { startService, stopProcess } from '../helpers/process.js';
import { startReceiver } from '../helpers/receiver.js';
import { signatureHeader } from '../../src/enrichment/signing.js';

const SECONDS = Number(process.env.LOAD_SECONDS ?? 60);
const ENRICHMENT_RATE = 20;
const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };

describe(`sustained load for ${SECONDS} s with MQTT and webhook output`, () => {
  it('answers every request without error and keeps memory flat', async () => {
    const env = await createTestEnv('sqlite', {
      WORKER: 'embedded',
      RATE_LIMIT_CAPACITY: '10000000',
      RATE_LIMIT_REFILL_PER_SEC: '10000000',
      MOTHERSHIP_ID: `load${randomBytes(3).toString('hex')}`,
    });
    const receiver = await startReceiver();
    // A private broker: the retained state of a load run must not reach anyone's Home Assistant.
    const broker = await startBroker();
    const port = await freePort();
    const service = await startService(env.env, port);
    const call = (method: string, path: string, body?: unknown) =>
      fetch(service.base + path, { method, headers: admin, body: body === undefined ? undefined : JSON.stringify(body) });
    try {
      assert.equal(
        (
          await call('POST', '/api/settings/integration', {
            mqtt: { enabled: true, broker_url: broker.url, topic_root: `load${randomBytes(3).toString('hex')}` },
            webhook: { enabled: true, url: receiver.url },
          })
        ).status,
        200,
      );
      await call('POST', '/api/persons', { id: 'ada', name: 'Ada' });
      for (const zone of ['kitchen', 'hall']) await call('POST', '/api/zones', { id: zone, name: zone });
      const requests = SECONDS * ENRICHMENT_RATE;
      const bots: { id: string; shared_secret: string }[] = [];
      for (let b = 0; b < Math.ceil(requests / 5); b++) {
        bots.push((await (await call('POST', '/api/bots', { id: `b${b}`, name: `B${b}` })).json()) as { id: string; shared_secret: string });
        for (let m = 0; m < 5; m++)
          await call('POST', '/api/matches', { id: `m${b * 5 + m}`, status: 'completed', replay: { players: [{ id: 'a', name: 'Ann' }] } });
      }

      // A dashboard that stopped reading (a stalled tab, a dead network path): its stream must not
      // make the service hold every event for it.
      const stalled = connect(port, '127.0.0.1');
      stalled.write(`GET /api/events/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${ADMIN_TOKEN}\r\n\r\n`);
      stalled.pause();

      const rss: number[] = [];
      const buffered: number[] = [];
      const sample = async () => {
        const metrics = await (await fetch(`${service.base}/metrics`)).text();
        rss.push(Number(/^mothership_process_resident_memory_bytes (\d+)/m.exec(metrics)?.[1]));
        buffered.push(Number(/^mothership_event_stream_buffered_bytes (\d+)/m.exec(metrics)?.[1]));
      };
      const sampler = setInterval(() => void sample(), 5000);
      let counter = 0;
      const [events, enrichment] = await Promise.all([
        autocannon({
          url: `${service.base}/api/events`,
          connections: 10,
          duration: SECONDS,
          method: 'POST',
          headers: admin,
          requests: [
            { body: JSON.stringify({ type: 'zone.entry', person: 'ada', zone: 'kitchen' }) },
            { body: JSON.stringify({ type: 'zone.entry', person: 'ada', zone: 'hall' }) },
            { body: JSON.stringify({ type: 'anomaly.detected', zone: 'hall', detail: { load: true } }) },
          ],
        }),
        autocannon({
          url: `${service.base}/api/request-enrichment`,
          connections: 4,
          amount: requests,
          overallRate: ENRICHMENT_RATE,
          requests: [
            {
              method: 'POST',
              setupRequest: (request: autocannon.Request) => {
                const index = counter++;
                const bot = bots[Math.floor(index / 5)]!;
                const body = JSON.stringify({ match_id: `m${index}` });
                const timestamp = String(Math.floor(Date.now() / 1000));
                const nonce = randomBytes(16).toString('hex');
                const signature = signatureHeader(bot.shared_secret, { method: 'POST', pathAndQuery: '/api/request-enrichment', timestamp, nonce, body });
                return {
                  ...request,
                  body,
                  headers: {
                    'content-type': 'application/json',
                    'x-bot-id': bot.id,
                    'x-bot-timestamp': timestamp,
                    'x-bot-nonce': nonce,
                    'x-bot-signature': signature,
                  },
                };
              },
            },
          ],
        }),
      ]);
      clearInterval(sampler);
      await sample();

      console.log(
        `# events: ${Math.round(events.requests.average)} req/s, p50 ${events.latency.p50} ms, p99 ${events.latency.p99} ms, ${events.requests.total} requests`,
      );
      console.log(
        `# enrichment: ${enrichment.requests.total} requests at ${ENRICHMENT_RATE}/s, p50 ${enrichment.latency.p50} ms, p99 ${enrichment.latency.p99} ms`,
      );
      console.log(`# RSS MiB every 5 s: ${rss.map((bytes) => (bytes / 2 ** 20).toFixed(0)).join(' ')}`);
      console.log(`# stalled stream: KiB buffered every 5 s: ${buffered.map((bytes) => (bytes / 1024).toFixed(0)).join(' ')}`);
      for (const [name, result] of [
        ['events', events],
        ['enrichment', enrichment],
      ] as const) {
        assert.equal(result.errors + result.timeouts, 0, `${name}: ${result.errors} errors, ${result.timeouts} timeouts`);
        assert.equal(result.non2xx, 0, `${name}: ${result.non2xx} non-2xx answers`);
      }
      assert.equal(enrichment.requests.total, requests);
      // The stalled client holds at most a page of events in the service, however many are written
      // (the stream waits for the socket to drain before it reads the next page).
      assert.ok(Math.max(...buffered) < 1024 * 1024, `the stalled stream buffered ${Math.max(...buffered)} bytes`);
      // A coarse leak guard: after warm-up (the first quarter) RSS does not keep growing with the
      // load. RSS moves with the garbage collector by a quarter either way, hence the margin.
      const warm = Math.max(...rss.slice(0, Math.max(1, Math.floor(rss.length / 4))));
      assert.ok(rss.at(-1)! <= warm * 1.5, `RSS grew from ${warm} to ${rss.at(-1)}`);
      // The enrichment jobs are all worked off by the embedded worker.
      await eventually(
        async () => {
          const metrics = await (await fetch(`${service.base}/metrics`)).text();
          return /^mothership_enrichment_queue_depth 0$/m.test(metrics);
        },
        30_000,
        'enrichment queue drained',
      );
      stalled.destroy();
    } finally {
      await stopProcess(service.child);
      await receiver.close();
      await broker.destroy();
      await env.cleanup();
    }
  });
});
