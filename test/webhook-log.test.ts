// #38 item 4: per-event-type subscriptions, payload and response in the log, final states, time
// order, "redeliver all failed", and the Test delivery signed like every delivery.
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Webhook } from 'standardwebhooks';
import { DEFAULT_WEBHOOK_EVENT_TYPES, webhookSubscribed } from '../src/settings/index.js';
import { EVENT_TYPES } from '../src/events/index.js';
import { WEBHOOK_LOG_BODY_LIMIT } from '../src/limits.js';
import { DIALECTS, eventually, startTestApp, type TestApp } from './helpers/app.js';
import { startReceiver } from './helpers/receiver.js';

const FAST = { WEBHOOK_RETRY_DELAY_MS: '300', WEBHOOK_TIMEOUT_MS: '400' };

describe('webhook subscriptions (pure)', () => {
  it('by default every event type except system.health (and the test, which is always sent)', () => {
    assert.deepEqual(
      DEFAULT_WEBHOOK_EVENT_TYPES,
      EVENT_TYPES.filter((type) => type !== 'system.health' && type !== 'webhook.test'),
    );
    assert.equal(webhookSubscribed(null, 'zone.entry'), true);
    assert.equal(webhookSubscribed(null, 'system.health'), false);
    assert.equal(webhookSubscribed(['system.health'], 'system.health'), true);
    assert.equal(webhookSubscribed(['system.health'], 'zone.entry'), false);
    assert.equal(webhookSubscribed([], 'zone.entry'), false);
  });
});

for (const dialect of DIALECTS) {
  describe(`webhook subscriptions and delivery log (${dialect})`, () => {
    let app: TestApp;
    let receiver: Awaited<ReturnType<typeof startReceiver>>;
    const ingest = async () => {
      const created = await app.api('POST', '/api/tokens', { name: 'node', scope: 'ingest' });
      return { authorization: `Bearer ${created.body.token}` };
    };

    before(async () => {
      receiver = await startReceiver();
      app = await startTestApp(dialect, FAST, { start: true });
      await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: receiver.url } });
    });
    after(async () => {
      await app.cleanup();
      await receiver.close();
    });
    beforeEach(() => {
      receiver.received.length = 0;
    });

    const settled = () =>
      eventually(
        async () => {
          const rows = (await app.api('GET', '/api/webhook/deliveries?limit=500')).body as { state: string }[];
          return rows.every((row) => row.state !== 'pending' && row.state !== 'sending') ? rows : null;
        },
        4000,
        'settled deliveries',
      );

    it('delivers every type but system.health by default; a saved list is what gets queued', async () => {
      const settings = (await app.api('GET', '/api/settings/integration')).body;
      assert.deepEqual(settings.webhook.event_types, DEFAULT_WEBHOOK_EVENT_TYPES);
      assert.equal(settings.webhook.event_types_default, true);
      const headers = await ingest();
      // A new node: node.online and system.health, in one transaction.
      assert.equal((await app.api('POST', '/api/nodes/n1/heartbeat', { quality: 80 }, headers)).status, 204);
      await eventually(() => receiver.received.length >= 1, 4000, 'node.online delivered');
      await settled();
      assert.deepEqual(
        receiver.received.map((request) => request.headers['x-service-event']),
        ['node.online'],
      );
      const queued = (await app.api('GET', '/api/webhook/deliveries?event_type=system.health')).body;
      assert.equal(queued.length, 0, 'no delivery row for an event nobody subscribed to');

      const saved = await app.api('POST', '/api/settings/integration', { webhook: { event_types: ['system.health'] } });
      assert.equal(saved.status, 200);
      assert.deepEqual(saved.body.webhook.event_types, ['system.health']);
      assert.equal(saved.body.webhook.event_types_default, false);
      receiver.received.length = 0;
      await app.api('POST', '/api/nodes/n2/heartbeat', { quality: 80 }, headers);
      await eventually(() => receiver.received.length >= 1, 4000, 'system.health delivered');
      await settled();
      assert.deepEqual(
        receiver.received.map((request) => request.headers['x-service-event']),
        ['system.health'],
      );

      const bad = await app.api('POST', '/api/settings/integration', { webhook: { event_types: ['zone.entry', 'nonsense'] } });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.errors[0].path, '/webhook/event_types/1');
      const reset = await app.api('POST', '/api/settings/integration', { webhook: { event_types: null } });
      assert.deepEqual(reset.body.webhook.event_types, DEFAULT_WEBHOOK_EVENT_TYPES);
      assert.equal(reset.body.webhook.event_types_default, true);
    });

    it('logs the payload sent and the first 4 KiB of the answer', async () => {
      const long = 'é'.repeat(WEBHOOK_LOG_BODY_LIMIT); // 2 bytes each: twice the limit
      receiver.answerNext((response) => response.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(long));
      await app.api('POST', '/api/zones', { id: 'loft', name: 'Loft' });
      await eventually(() => receiver.received.length === 1, 4000, 'delivery');
      const [row] = (await settled()) as any[];
      assert.equal(row.event_type, 'zone.created');
      assert.equal(row.payload, receiver.received[0]!.body, 'the exact bytes sent');
      assert.ok(Buffer.byteLength(row.response_body) <= WEBHOOK_LOG_BODY_LIMIT, `${Buffer.byteLength(row.response_body)} bytes kept`);
      assert.ok(row.response_body.startsWith('éé'));
      assert.ok(row.response_body.endsWith('…'));
    });

    it('a retried attempt ends as retried, the rows are in attempt time order, and every failure is redelivered once on request', async () => {
      // The receiver fails every attempt of the mode change, and takes everything else.
      const failModeChanges = (response: import('node:http').ServerResponse) =>
        response.writeHead(receiver.received.at(-1)!.headers['x-service-event'] === 'system.mode_changed' ? 503 : 200).end();
      receiver.answerNext(failModeChanges, failModeChanges, failModeChanges);
      await app.api('PUT', '/api/system/mode', { mode: 'away' });
      // Written while the retry waits: attempted before the retry, though its row is newer.
      await eventually(() => receiver.received.length === 1, 4000, 'first attempt');
      await app.api('POST', '/api/zones', { id: 'attic', name: 'Attic' });
      await eventually(() => receiver.received.length === 3, 4000, 'retry');
      const rows = (await settled()) as any[];
      const modes = rows.filter((row) => row.event_type === 'system.mode_changed');
      assert.deepEqual(
        modes.map((row) => [row.attempt, row.state, row.status_code]),
        [
          [2, 'failed', 503],
          [1, 'retried', 503],
        ],
      );
      const times = rows.map((row) => row.attempted_at);
      assert.deepEqual(times, [...times].sort().reverse(), 'newest attempt first');
      assert.equal(rows[0].event_type, 'system.mode_changed', 'the retry, attempted last, is on top');

      receiver.received.length = 0;
      const failedBefore = rows.filter((row) => row.state === 'failed').length;
      const redelivered = await app.api('POST', '/api/webhook/deliveries/redeliver-failed');
      assert.equal(redelivered.status, 202);
      assert.equal(redelivered.body.redelivered, failedBefore);
      await eventually(() => receiver.received.length === failedBefore, 4000, 'redeliveries');
      assert.ok(receiver.received.some((request) => request.headers['x-service-event'] === 'system.mode_changed'));
      await settled();
      const again = await app.api('POST', '/api/webhook/deliveries/redeliver-failed');
      assert.equal(again.body.redelivered, 0, 'a failure already redelivered is not sent again');
    });

    it('the Test delivery carries both signatures during the rotation grace, like every delivery', async () => {
      const first = (await app.api('POST', '/api/settings/integration/webhook-secret')).body.secret as string;
      const second = (await app.api('POST', '/api/settings/integration/webhook-secret')).body.secret as string;
      const tested = await app.api('POST', '/api/settings/integration/test', { target: 'webhook' });
      assert.equal(tested.body.webhook.ok, true);
      const request = receiver.received.at(-1)!;
      assert.equal(request.headers['x-service-event'], 'webhook.test');
      assert.equal(String(request.headers['webhook-signature']).split(' ').length, 2);
      new Webhook(first).verify(request.body, request.headers as Record<string, string>);
      new Webhook(second).verify(request.body, request.headers as Record<string, string>);
      // A secret typed into the form is tested as a save would make it: new and replaced one.
      const typed = 'whsec_' + Buffer.alloc(32, 9).toString('base64');
      await app.api('POST', '/api/settings/integration/test', { target: 'webhook', webhook: { secret: typed } });
      const candidate = receiver.received.at(-1)!;
      new Webhook(typed).verify(candidate.body, candidate.headers as Record<string, string>);
      new Webhook(second).verify(candidate.body, candidate.headers as Record<string, string>);
    });
  });
}
