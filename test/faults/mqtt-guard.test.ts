import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import mqtt from 'mqtt';
import { createTestEnv, eventually, startTestApp } from '../helpers/app.js';
import { freePort, observer, startBroker } from '../helpers/broker.js';
import { admin, allEvents, startService, stopProcess } from '../helpers/process.js';

type Broker = Awaited<ReturnType<typeof startBroker>>;

/** A real `mothership serve` logging at `info`, with MQTT saved for `broker` under a topic root of its own. */
async function serviceOn(broker: Broker, extra: Record<string, string>) {
  const mid = `ms${randomBytes(4).toString('hex')}`;
  const root = `root${randomBytes(4).toString('hex')}`;
  const env = await createTestEnv('sqlite', { MOTHERSHIP_ID: mid, LOG_LEVEL: 'info', ...extra });
  const setup = await startTestApp('sqlite', {}, { testEnv: env });
  await setup.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url, topic_root: root } });
  await setup.close();
  const { child, base } = await startService(env.env, await freePort());
  const get = async (path: string) => (await fetch(base + path, { headers: admin })).json() as Promise<any>;
  return {
    mid,
    root,
    child,
    base,
    status: async () => (await get('/api/settings/integration')).mqtt.status,
    mode: async () => ((await get('/api/system/mode')) as { mode: string }).mode,
    /** The sum of a metric's samples (every label). */
    metric: async (name: string) => {
      const text = await (await fetch(`${base}/metrics`)).text();
      const samples = text.split('\n').filter((line) => line.startsWith(`${name} `) || line.startsWith(`${name}{`));
      return samples.reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
    },
    /** The service's log lines (JSON) whose message contains `text`. */
    logLines: (text: string) =>
      child
        .output()
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as { msg: string; level: number })
        .filter((line) => line.msg.includes(text)),
    async stop() {
      await stopProcess(child);
      await env.cleanup();
    },
  };
}

describe('MQTT: another client with the installation client id (an older release without MQTT ownership)', () => {
  it('is detected and said once (status, metric, log), the service backs off instead of fighting, and recovers when the other client goes away', async () => {
    const broker = await startBroker();
    const service = await serviceOn(broker, {
      MQTT_BACKOFF_INITIAL_MS: '200',
      MQTT_BACKOFF_MAX_MS: '400',
      MQTT_TAKEOVER_SESSION_MS: '1500',
      MQTT_TAKEOVER_BACKOFF_MS: '4000',
    });
    const clientId = `mothership-${service.mid}`;
    // The broker logs every connect with its client id and keepalive: the service's are k30, the rival's k45.
    const ourConnects = () => broker.output().split(`as ${clientId} (p5, c1, k30`).length - 1;
    let rival: mqtt.MqttClient | null = null;
    let view: Awaited<ReturnType<typeof observer>> | null = null;
    try {
      await eventually(async () => (await service.status()).connected, 10_000, 'MQTT connected');
      const availability = `${service.root}/${service.mid}/availability`;
      view = await observer(broker.url, [availability]);

      // What an older release does: it reconnects shortly after the broker hands its client id to the
      // service, for ever, taking it back each time.
      rival = mqtt.connect(broker.url, { clientId, keepalive: 45, reconnectPeriod: 300 });
      const status = await eventually(
        async () => {
          const current = await service.status();
          return current.client_id_conflict === true ? current : null;
        },
        15_000,
        'the takeovers detected',
      );
      assert.match(status.last_error, /another client keeps connecting with this installation's client id/);
      assert.equal(await service.metric('mothership_mqtt_client_id_conflict'), 1);
      assert.ok((await service.metric('mothership_mqtt_sessions_cut_short_total')) >= 3);
      const warning = "another client keeps connecting with this installation's client id";
      assert.equal(service.logLines(warning).length, 1);

      // Backing off: over 9 s with a 4 s takeover backoff, at most 3 connects (fighting, it connected
      // every 0.5 s), and no more `offline` than that on the availability topic.
      const connectsBefore = ourConnects();
      const offlineBefore = view.messages.filter((message) => message.payload === 'offline').length;
      await new Promise((resolve) => setTimeout(resolve, 9000)); // the window measured, not a synchronisation
      const connects = ourConnects() - connectsBefore;
      const offline = view.messages.filter((message) => message.payload === 'offline').length - offlineBefore;
      assert.ok(connects >= 1 && connects <= 3, `${connects} connects in 9 s while backing off`);
      assert.ok(offline <= connects, `${offline} offline in 9 s`);
      assert.equal((await service.status()).client_id_conflict, true);
      assert.equal(service.logLines(warning).length, 1, 'said once');
      assert.ok(service.logLines('MQTT connection lost').length <= 3, 'no line per takeover');
      assert.match(service.logLines('MQTT connection lost')[0]!.msg, /closed by the broker/);

      // The other client goes away: the next attempt keeps the connection, and the conflict clears.
      await rival.endAsync(true);
      rival = null;
      await eventually(
        async () => {
          const current = await service.status();
          return current.connected && current.client_id_conflict === false && current.last_error === null;
        },
        15_000,
        'recovered',
      );
      assert.equal(await service.metric('mothership_mqtt_client_id_conflict'), 0);
      assert.equal(service.logLines('the client id is ours again').length, 1);
      await eventually(() => view!.last(availability) === 'online', 5000, 'online');
    } finally {
      await rival?.endAsync(true);
      await view?.close();
      await service.stop();
      await broker.destroy();
    }
  });
});

describe('MQTT: a flood of mode commands', () => {
  it('creates at most the documented events, logs each refusal reason once, and a command after it still works', async (t) => {
    // An unbounded queue at the broker: every command of the flood reaches the service.
    const broker = await startBroker({ config: ['max_queued_messages 0'] });
    const service = await serviceOn(broker, {});
    let flooder: mqtt.MqttClient | null = null;
    try {
      await eventually(async () => (await service.status()).connected, 10_000, 'MQTT connected');
      // Its subscriptions follow the CONNACK: a command is followed once the mode is published.
      const modeTopic = `${service.root}/${service.mid}/system/mode`;
      const view = await observer(broker.url, [modeTopic]);
      await eventually(() => view.last(modeTopic) === 'home', 5000, 'mode published');
      await view.close();

      flooder = await mqtt.connectAsync(broker.url, { clientId: `flooder-${randomBytes(3).toString('hex')}` });
      const command = `${modeTopic}/set`;
      const payloads = ['away', 'sleep', 'party', 'vacation', 'home', '{"mode":"away"}'];
      const FLOOD = 5000;
      const started = Date.now();
      await Promise.all(Array.from({ length: FLOOD }, (_, index) => flooder!.publishAsync(command, payloads[index % payloads.length]!, { qos: 1 })));
      await eventually(async () => (await service.metric('mothership_mqtt_commands_total')) === FLOOD, 60_000, 'every command handled');
      const seconds = (Date.now() - started) / 1000;

      // docs/mqtt.md: 5 at once, then 1 a second per topic.
      const events = await allEvents(service.base, 'system.mode_changed');
      t.diagnostic(`${FLOOD} commands in ${seconds.toFixed(1)} s: ${events.length} mode changes`);
      assert.ok(events.length >= 1, 'some commands were followed');
      assert.ok(events.length <= 5 + Math.ceil(seconds), `${events.length} mode changes in ${seconds.toFixed(1)} s`);
      assert.equal(service.logLines('ignored MQTT message: unknown mode').length, 1);
      assert.equal(service.logLines('MQTT command refused: over the rate limit').length, 1);

      // After the flood (a token refills in a second: the documented rate) a command works again...
      await new Promise((resolve) => setTimeout(resolve, 1100));
      const next = (await service.mode()) === 'sleep' ? 'away' : 'sleep';
      await flooder.publishAsync(command, next, { qos: 1 });
      await eventually(async () => (await service.mode()) === next, 5000, 'the command after the flood followed');
      assert.equal((await allEvents(service.base, 'system.mode_changed')).length, events.length + 1);
      // ...and the same mode again changes nothing: no event.
      await new Promise((resolve) => setTimeout(resolve, 1100));
      const accepted = await service.metric('mothership_mqtt_commands_total{outcome="accepted"}');
      await flooder.publishAsync(command, next, { qos: 1 });
      await eventually(async () => (await service.metric('mothership_mqtt_commands_total{outcome="accepted"}')) === accepted + 1, 5000, 'handled');
      assert.equal((await allEvents(service.base, 'system.mode_changed')).length, events.length + 1);
    } finally {
      await flooder?.endAsync(true);
      await service.stop();
      await broker.destroy();
    }
  });
});
