import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { eventually, startTestApp, type TestApp } from './helpers/app.js';
import { anonymousAcl, retainedAll, startBroker } from './helpers/broker.js';

/**
 * A broker whose ACL lets the service publish its state and only the `sensor` discovery configs, and
 * refuses the subscription to Home Assistant's birth topic: with MQTT 5 every refusal is reported;
 * with MQTT 3.1.1 the broker acknowledges the publishes it drops.
 */
describe('MQTT 5: what the broker refuses is reported', () => {
  const id = randomBytes(4).toString('hex');
  const [mid, root, prefix, birth] = [`ms${id}`, `root${id}`, `ha${id}`, `birth${id}/status`];
  let broker: Awaited<ReturnType<typeof startBroker>>;
  let app: TestApp;
  /** The configs of one person and one zone, and the installation's own (fall, mode, node count, quality). */
  const ALL_CONFIGS = 9;
  const SENSOR_CONFIGS = 4;

  const status = async () => (await app.api('GET', '/api/settings/integration')).body.mqtt.status;
  const configsOnBroker = async () => [...(await retainedAll(broker.url, [`${prefix}/#`])).keys()].filter((topic) => topic.endsWith('/config'));

  before(async () => {
    broker = await startBroker({
      dynamicSecurity: anonymousAcl([`${root}/#`, `${prefix}/sensor/#`, 'mothership-test-probe/#'], [`${root}/#`, `${prefix}/#`, 'mothership-test-probe/#']),
    });
    app = await startTestApp('sqlite', { MOTHERSHIP_ID: mid, MQTT_BACKOFF_INITIAL_MS: '100', MQTT_BACKOFF_MAX_MS: '400' }, { start: true });
    await app.api('POST', '/api/persons', { id: 'ada', name: 'Ada' });
    await app.api('POST', '/api/zones', { id: 'kitchen', name: 'Kitchen' });
    const saved = await app.api('POST', '/api/settings/integration', {
      mqtt: { enabled: true, broker_url: broker.url, topic_root: root, discovery_prefix: prefix, birth_topic: birth },
    });
    assert.equal(saved.status, 200, JSON.stringify(saved.body));
  });
  after(async () => {
    await app?.cleanup();
    await broker?.destroy();
  });

  it('connects with MQTT 5 by default and reports refused publishes and subscriptions in the status; the rest of the sync goes on', async () => {
    assert.equal((await app.api('GET', '/api/settings/integration')).body.mqtt.protocol_version, '5');
    const reported = await eventually(
      async () => {
        const current = await status();
        return current.connected && current.refused_publishes === ALL_CONFIGS - SENSOR_CONFIGS ? current : null;
      },
      10_000,
      'refused publishes reported',
    );
    assert.equal(reported.refused_subscriptions, 1);
    assert.equal(reported.last_error, null, 'a refusal is not a connection error');
    assert.equal(reported.last_refusal.kind, 'publish');
    assert.equal(reported.last_refusal.reason, 'not authorized');
    assert.equal(reported.last_refusal.reason_code, 0x87);
    assert.match(reported.last_refusal.topic, new RegExp(`^${prefix}/(binary_sensor|device_tracker|select)/${mid}/.+/config$`));
    // Mosquitto names the protocol of each client in its log: p5 is MQTT 5, p2 is 3.1.1.
    await eventually(() => broker.output().includes('(p5, c1, k30)'), 5000, 'MQTT 5 on the wire');
    // Refusals do not end the sync: the state after the refused configs arrives.
    const retained = await eventually(
      async () => {
        const set = await retainedAll(broker.url, [`${root}/#`]);
        return set.has(`${root}/${mid}/system/health`) && set.has(`${root}/${mid}/zone/kitchen/occupancy`) ? set : null;
      },
      5000,
      'state published',
    );
    assert.equal(retained.get(`${root}/${mid}/availability`), 'online');
    assert.equal((await configsOnBroker()).length, SENSOR_CONFIGS);
  });

  it('counts refusals in a metric by kind and reason', async () => {
    const metrics = (await app.api('GET', '/metrics')).body as string;
    assert.match(metrics, new RegExp(`mothership_mqtt_refusals_total\\{kind="publish",reason="not authorized"\\} ${ALL_CONFIGS - SENSOR_CONFIGS}\\n`));
    assert.match(metrics, /mothership_mqtt_refusals_total\{kind="subscribe",reason="not authorized"\} 1\n/);
  });

  it('Publish Discovery answers how many configs the broker accepted and how many it refused', async () => {
    const answer = await app.api('POST', '/api/settings/integration/discovery');
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.deepEqual(answer.body, { published: SENSOR_CONFIGS, refused: ALL_CONFIGS - SENSOR_CONFIGS });
    assert.equal((await status()).refused_publishes, 2 * (ALL_CONFIGS - SENSOR_CONFIGS));
  });

  it('with MQTT 3.1.1 (the setting for old brokers) the broker acknowledges what it drops: only the refused subscription shows', async () => {
    const before = (await status()).last_connected_at;
    const saved = await app.api('POST', '/api/settings/integration', { mqtt: { protocol_version: '3.1.1' } });
    assert.equal(saved.status, 200, JSON.stringify(saved.body));
    const reported = await eventually(
      async () => {
        const current = await status();
        return current.connected && current.last_connected_at !== before && current.refused_subscriptions === 1 ? current : null;
      },
      10_000,
      'reconnected with MQTT 3.1.1',
    );
    await eventually(() => broker.output().includes('(p2, c1, k30)'), 5000, 'MQTT 3.1.1 on the wire');
    assert.equal(reported.last_refusal.kind, 'subscribe');
    assert.equal(reported.last_refusal.topic, birth);
    assert.equal(reported.last_refusal.reason_code, 0x80);
    const answer = await app.api('POST', '/api/settings/integration/discovery');
    assert.deepEqual(answer.body, { published: ALL_CONFIGS, refused: 0 }, 'what MQTT 3.1.1 cannot tell');
    assert.equal((await status()).refused_publishes, 0);
    assert.equal((await configsOnBroker()).length, SENSOR_CONFIGS);
  });

  it('refuses an unknown protocol version naming the field', async () => {
    const answer = await app.api('POST', '/api/settings/integration', { mqtt: { protocol_version: '3.1' } });
    assert.equal(answer.status, 400);
    assert.match(JSON.stringify(answer.body), /protocol_version/);
  });
});
