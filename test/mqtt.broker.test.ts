import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createTestEnv, eventually, startTestApp, type TestApp } from './helpers/app.js';
import { freePort, observer, patientProxy, retainedAll, retainedSet, stallingProxy, startBroker } from './helpers/broker.js';
import { CUT_SHORT_IN_A_ROW } from '../src/mqtt/takeover.js';
import { spawnMothership, START_TIMEOUT_MS, startService, stopProcess } from './helpers/process.js';
import { Database, getSetting } from '../src/db/index.js';
import { DEFAULT_WEBHOOK_EVENT_TYPES } from '../src/settings/model.js';

const unique = () => randomBytes(4).toString('hex');

/** A discovery config as Mothership publishes it for an installation (what the cleanup recognises as its own). */
const ourConfig = (installation: string) =>
  JSON.stringify({ device: { identifiers: [`mothership_${installation}`], name: 'Mothership' }, origin: { name: 'Mothership' } });
const FOREIGN_CONFIG = JSON.stringify({
  name: 'Temperature',
  state_topic: 'ms-old/sensor/temperature/state',
  device: { identifiers: ['esphome_ms-old'], name: 'ms-old' },
});

/** An app whose MQTT topics are private to this test (shared broker, unique root, prefix and client id). */
async function mqttApp(extra: Record<string, string> = {}) {
  const id = unique();
  const names = { mid: `ms${id}`, root: `root${id}`, prefix: `ha${id}` };
  const app = await startTestApp(
    'sqlite',
    { MOTHERSHIP_ID: names.mid, MQTT_BACKOFF_INITIAL_MS: '100', MQTT_BACKOFF_MAX_MS: '400', MQTT_BIRTH_DELAY_MAX_MS: '300', ...extra },
    { start: true },
  );
  return { app, ...names };
}

/** Saves MQTT settings that reconnect, and waits for the new connection (the save answers before it). */
async function saveAndReconnect(app: TestApp, mqtt: Record<string, unknown>) {
  const before = (await app.api('GET', '/api/settings/integration')).body.mqtt.status.last_connected_at;
  assert.equal((await app.api('POST', '/api/settings/integration', { mqtt })).status, 200);
  await eventually(
    async () => {
      const { status } = (await app.api('GET', '/api/settings/integration')).body.mqtt;
      return status.connected && status.last_connected_at !== before;
    },
    5000,
    'reconnected',
  );
  await new Promise((resolve) => setTimeout(resolve, 200)); // its subscriptions follow the CONNACK
}

const connected = (app: TestApp) =>
  eventually(async () => (await app.api('GET', '/api/settings/integration')).body.mqtt.status.connected === true, 5000, 'MQTT connected');

describe('MQTT publishing', () => {
  // A private broker: retained configs on a shared one would appear as devices in a real Home Assistant.
  let broker: Awaited<ReturnType<typeof startBroker>>;
  let app: TestApp;
  let mid: string;
  let root: string;
  let prefix: string;

  before(async () => {
    broker = await startBroker();
    ({ app, mid, root, prefix } = await mqttApp());
    await app.api('POST', '/api/persons', { id: 'ada', name: 'Ada' });
    await app.api('POST', '/api/zones', { id: 'kitchen', name: 'Kitchen' });
    // A ghost: a retained config of this installation for a person that no longer exists.
    const ghost = await observer(broker.url, []);
    await ghost.client.publishAsync(`${prefix}/binary_sensor/${mid}/person_ghost_presence/config`, JSON.stringify({ name: 'Ghost' }), { retain: true, qos: 1 });
    await ghost.close();
    const saved = await app.api('POST', '/api/settings/integration', {
      mqtt: { enabled: true, broker_url: broker.url, topic_root: root, discovery_prefix: prefix },
    });
    assert.equal(saved.status, 200, JSON.stringify(saved.body));
    await connected(app);
  });
  after(async () => {
    await app.cleanup();
    await broker.destroy();
  });

  it('publishes availability, every discovery config and the current state, retained', async () => {
    const retained = await eventually(
      async () => {
        const set = await retainedSet(broker.url, [`${root}/#`, `${prefix}/#`]);
        // The ghost is cleared once the sync is done (the next test checks that it goes).
        const settled = set.has(`${root}/${mid}/system/health`) && !set.has(`${prefix}/binary_sensor/${mid}/person_ghost_presence/config`);
        return settled && set.size >= 15 ? set : null;
      },
      5000,
      'retained set',
    );
    assert.equal(retained.get(`${root}/${mid}/availability`), 'online');
    const configs = [...retained.keys()].filter((topic) => topic.endsWith('/config')).sort();
    assert.deepEqual(configs, [
      `${prefix}/binary_sensor/${mid}/fall/config`,
      `${prefix}/binary_sensor/${mid}/person_ada_presence/config`,
      `${prefix}/binary_sensor/${mid}/zone_kitchen_occupied/config`,
      `${prefix}/device_tracker/${mid}/person_ada/config`,
      `${prefix}/select/${mid}/mode/config`,
      `${prefix}/sensor/${mid}/node_count/config`,
      `${prefix}/sensor/${mid}/person_ada_room/config`,
      `${prefix}/sensor/${mid}/quality/config`,
      `${prefix}/sensor/${mid}/zone_kitchen_count/config`,
    ]);
    const presence = JSON.parse(retained.get(`${prefix}/binary_sensor/${mid}/person_ada_presence/config`)!);
    assert.equal(presence.state_topic, `${root}/${mid}/person/ada/presence`);
    assert.equal(presence.availability[0].topic, `${root}/${mid}/availability`);
    // Ada has not been seen yet: no presence (Home Assistant shows unknown), only her attributes.
    assert.equal(retained.get(`${root}/${mid}/person/ada/presence`), undefined);
    assert.deepEqual(JSON.parse(retained.get(`${root}/${mid}/person/ada/attributes`)!), { zone: null, room: null, last_seen: null });
    assert.deepEqual(JSON.parse(retained.get(`${root}/${mid}/zone/kitchen/occupancy`)!), { count: 0, occupied: false, occupants: [] });
    assert.deepEqual(JSON.parse(retained.get(`${root}/${mid}/fall`)!), { state: 'OFF', person: null, zone: null, timestamp: null });
    assert.equal(retained.get(`${root}/${mid}/system/mode`), 'home');
    const health = JSON.parse(retained.get(`${root}/${mid}/system/health`)!);
    assert.deepEqual(Object.keys(health).sort(), ['mode', 'node_count', 'quality', 'timestamp']);
  });

  it('cleared the ghost config of an entity that no longer exists', async () => {
    await eventually(
      async () => !(await retainedSet(broker.url, [`${prefix}/#`])).has(`${prefix}/binary_sensor/${mid}/person_ghost_presence/config`),
      5000,
      'ghost cleared',
    );
  });

  it('mirrors zone entry and exit into presence and occupancy topics', async () => {
    const view = await observer(broker.url, [`${root}/${mid}/#`]);
    try {
      await app.api('POST', '/api/events', { type: 'zone.entry', person: 'ada', zone: 'kitchen' });
      await eventually(() => view.last(`${root}/${mid}/person/ada/presence`) === 'home', 3000, 'home');
      await eventually(
        () => view.last(`${root}/${mid}/zone/kitchen/occupancy`) === JSON.stringify({ count: 1, occupied: true, occupants: ['ada'] }),
        3000,
        'occupied',
      );
      const attributes = JSON.parse(view.last(`${root}/${mid}/person/ada/attributes`)!);
      assert.equal(attributes.zone, 'kitchen');
      await app.api('POST', '/api/events', { type: 'zone.exit', person: 'ada', zone: 'kitchen' });
      await eventually(
        () => view.last(`${root}/${mid}/zone/kitchen/occupancy`) === JSON.stringify({ count: 0, occupied: false, occupants: [] }),
        3000,
        'empty',
      );
    } finally {
      await view.close();
    }
  });

  it('publishes falls (retained) and anomalies (not retained)', async () => {
    const view = await observer(broker.url, [`${root}/${mid}/fall`, `${root}/${mid}/anomaly`]);
    try {
      await app.api('POST', '/api/events', { type: 'fall.detected', person: 'ada', zone: 'kitchen' });
      await app.api('POST', '/api/events', { type: 'anomaly.detected', zone: 'kitchen', detail: { kind: 'motion' } });
      await eventually(() => view.last(`${root}/${mid}/anomaly`), 3000, 'anomaly');
      const fall = await eventually(() => view.messages.find((message) => message.topic.endsWith('/fall') && message.payload.includes('"ON"')), 3000, 'fall');
      assert.deepEqual(Object.keys(JSON.parse(fall.payload)).sort(), ['person', 'state', 'timestamp', 'zone']);
      assert.equal(JSON.parse(fall.payload).person, 'ada');
      const anomaly = JSON.parse(view.last(`${root}/${mid}/anomaly`)!);
      assert.equal(anomaly.event_type, 'anomaly.detected');
      const retained = await retainedSet(broker.url, [`${root}/${mid}/anomaly`, `${root}/${mid}/fall`]);
      assert.equal(retained.has(`${root}/${mid}/anomaly`), false, 'anomalies are not retained');
      assert.equal(JSON.parse(retained.get(`${root}/${mid}/fall`)!).state, 'ON');
    } finally {
      await view.close();
    }
  });

  it('publishes the online node count at once when a node comes online, not at the next health report', async () => {
    const view = await observer(broker.url, [`${root}/${mid}/system/health`]);
    try {
      await app.api('POST', '/api/nodes/mqtt-node/heartbeat', { quality: 77 });
      const health = await eventually(
        () => view.messages.map((message) => JSON.parse(message.payload)).find((payload) => payload.node_count === 1),
        3000,
        'node_count 1',
      );
      assert.equal(health.quality, 77);
    } finally {
      await view.close();
    }
  });

  it('republishes everything when Home Assistant announces itself', async () => {
    const view = await observer(broker.url, [`${root}/${mid}/availability`, `${prefix}/select/${mid}/mode/config`]);
    try {
      await new Promise((resolve) => setTimeout(resolve, 200));
      view.messages.length = 0;
      await view.client.publishAsync('homeassistant/status', 'online', { qos: 1 });
      await eventually(
        () => view.messages.some((message) => message.topic.endsWith('/mode/config')) && view.last(`${root}/${mid}/availability`) === 'online',
        3000,
        'birth republish',
      );
    } finally {
      await view.close();
    }
  });

  it('answers a burst of birth messages with one full sync, on the birth topic of the settings', async () => {
    const modeConfig = `${prefix}/select/${mid}/mode/config`;
    const view = await observer(broker.url, [modeConfig]);
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    try {
      await sleep(200);
      view.messages.length = 0;
      for (let birth = 0; birth < 5; birth++) await view.client.publishAsync('homeassistant/status', 'online', { qos: 1 });
      await eventually(() => view.messages.length > 0, 3000, 'birth republish');
      await sleep(700); // longer than the test's birth delay (MQTT_BIRTH_DELAY_MAX_MS)
      assert.equal(view.messages.length, 1, 'five births, one full sync');

      // Home Assistant configures its birth topic apart from the discovery prefix.
      await saveAndReconnect(app, { birth_topic: `${prefix}/hass-status` });
      await sleep(500);
      view.messages.length = 0;
      await view.client.publishAsync('homeassistant/status', 'online', { qos: 1 });
      await sleep(700);
      assert.equal(view.messages.length, 0, 'the default topic is not followed any more');
      await view.client.publishAsync(`${prefix}/hass-status`, 'online', { qos: 1 });
      await eventually(() => view.messages.length === 1, 3000, 'birth on the configured topic');
    } finally {
      await saveAndReconnect(app, { birth_topic: 'homeassistant/status' });
      await view.close();
    }
  });

  it('follows mode commands and ignores retained or unknown ones', async () => {
    const commander = await observer(broker.url, []);
    try {
      await commander.client.publishAsync(`${root}/${mid}/system/mode/set`, 'sleep', { qos: 1 });
      await eventually(async () => (await app.api('GET', '/api/system/mode')).body.mode === 'sleep', 3000, 'mode sleep');
      await commander.client.publishAsync(`${root}/${mid}/system/mode/set`, 'disco', { qos: 1 });
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal((await app.api('GET', '/api/system/mode')).body.mode, 'sleep', 'an unknown mode is ignored');
      await eventually(
        async () => (await retainedSet(broker.url, [`${root}/${mid}/system/mode`])).get(`${root}/${mid}/system/mode`) === 'sleep',
        3000,
        'mode state',
      );
      // A retained command reaches the service on every (re)subscribe: it must not flip the mode then.
      await commander.client.publishAsync(`${root}/${mid}/system/mode/set`, 'away', { qos: 1, retain: true });
      await eventually(async () => (await app.api('GET', '/api/system/mode')).body.mode === 'away', 3000, 'live command applied');
      await app.api('PUT', '/api/system/mode', { mode: 'sleep' });
      await app.api('POST', '/api/settings/integration', { mqtt: { enabled: false } });
      await app.api('POST', '/api/settings/integration', { mqtt: { enabled: true } });
      await connected(app);
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal((await app.api('GET', '/api/system/mode')).body.mode, 'sleep', 'the stale retained command was ignored on resubscribe');
      await commander.client.publishAsync(`${root}/${mid}/system/mode/set`, '', { qos: 1, retain: true });
    } finally {
      await commander.close();
    }
  });

  it('removes a deleted person: empty config and cleared state', async () => {
    await app.api('POST', '/api/persons', { id: 'bob', name: 'Bob' });
    const config = `${prefix}/binary_sensor/${mid}/person_bob_presence/config`;
    await eventually(async () => (await retainedSet(broker.url, [config])).has(config), 3000, 'bob config');
    await app.api('DELETE', '/api/persons/bob');
    await eventually(
      async () => {
        const set = await retainedSet(broker.url, [`${prefix}/#`, `${root}/${mid}/person/bob/#`]);
        return !set.has(config) && !set.has(`${root}/${mid}/person/bob/presence`) && !set.has(`${root}/${mid}/person/bob/attributes`);
      },
      3000,
      'bob removed',
    );
  });

  it('removes a deleted zone: empty configs, cleared occupancy, and its occupants moved out', async () => {
    await app.api('POST', '/api/zones', { id: 'cellar', name: 'Cellar' });
    await app.api('POST', '/api/persons', { id: 'cy', name: 'Cy' });
    await app.api('POST', '/api/events', { type: 'zone.entry', person: 'cy', zone: 'cellar' });
    const configs = [`${prefix}/sensor/${mid}/zone_cellar_count/config`, `${prefix}/binary_sensor/${mid}/zone_cellar_occupied/config`];
    const occupancy = `${root}/${mid}/zone/cellar/occupancy`;
    const attributes = `${root}/${mid}/person/cy/attributes`;
    await eventually(
      async () => {
        const set = await retainedSet(broker.url, [...configs, occupancy, attributes]);
        return configs.every((topic) => set.has(topic)) && set.has(occupancy) && JSON.parse(set.get(attributes) ?? '{}').zone === 'cellar';
      },
      3000,
      'cellar published',
    );
    await app.api('DELETE', '/api/zones/cellar');
    await eventually(
      async () => {
        const set = await retainedSet(broker.url, [...configs, occupancy, attributes]);
        return configs.every((topic) => !set.has(topic)) && !set.has(occupancy) && JSON.parse(set.get(attributes) ?? '{}').zone === null;
      },
      3000,
      'cellar removed and cy moved out',
    );
    await app.api('DELETE', '/api/persons/cy');
  });

  it("a person's device tracker says home in any room (what Home Assistant's person needs), the room is an attribute and follows a rename, and both go with the person", async () => {
    await app.api('POST', '/api/persons', { id: 'eve', name: 'Eve' });
    await app.api('POST', '/api/zones', { id: 'study', name: 'Study' });
    const tracker = `${root}/${mid}/person/eve/tracker`;
    const attributes = `${root}/${mid}/person/eve/attributes`;
    const config = `${prefix}/device_tracker/${mid}/person_eve/config`;
    const roomConfig = `${prefix}/sensor/${mid}/person_eve_room/config`;
    const retained = () => retainedSet(broker.url, [tracker, attributes, config, roomConfig]);
    const room = async () => JSON.parse((await retained()).get(attributes) ?? '{}').room;
    await eventually(async () => (await retained()).has(attributes) && (await retained()).has(config), 3000, 'config and attributes published');
    assert.equal((await retained()).get(tracker), undefined, 'no tracker state before Eve is first seen');
    const published = JSON.parse((await retained()).get(config)!);
    assert.equal(published.state_topic, tracker);
    assert.equal(JSON.parse((await retained()).get(roomConfig)!).state_topic, attributes);
    await app.api('POST', '/api/events', { type: 'zone.entry', person: 'eve', zone: 'study' });
    await eventually(async () => (await retained()).get(tracker) === 'home' && (await room()) === 'Study', 3000, 'home, in the study');
    await app.api('PATCH', '/api/zones/study', { name: 'Library' });
    await eventually(async () => (await room()) === 'Library', 3000, 'the room follows the rename');
    await app.api('DELETE', '/api/persons/eve');
    await eventually(async () => (await retained()).size === 0, 3000, 'tracker, room sensor and state removed with the person');
    await app.api('DELETE', '/api/zones/study');
  });

  it('corrects, while connected, a retained config under its discovery topics that is not what it published: a fake is replaced, a ghost cleared', async () => {
    const config = `${prefix}/binary_sensor/${mid}/person_ada_presence/config`;
    const ghost = `${prefix}/sensor/${mid}/person_nobody_room/config`;
    const ours = await eventually(async () => (await retainedSet(broker.url, [config])).get(config), 3000, 'our config');
    const intruder = await observer(broker.url, []);
    try {
      await intruder.client.publishAsync(config, JSON.stringify({ name: 'Fake', state_topic: 'elsewhere' }), { qos: 1, retain: true });
      await intruder.client.publishAsync(ghost, JSON.stringify({ name: 'Nobody' }), { qos: 1, retain: true });
      await eventually(
        async () => {
          const set = await retainedSet(broker.url, [config, ghost]);
          return set.get(config) === ours && !set.has(ghost);
        },
        3000,
        'the fake replaced by our config and the ghost cleared',
      );
    } finally {
      await intruder.close();
    }
  });

  it('republishes discovery on request', async () => {
    const response = await app.api('POST', '/api/settings/integration/discovery');
    assert.equal(response.status, 200);
    assert.deepEqual(response.body, { published: 9, refused: 0 });
  });
});

describe('MQTT connection management', () => {
  it('connects with the client id mothership-{mid}', async () => {
    const broker = await startBroker();
    const { app, mid, root, prefix } = await mqttApp();
    try {
      await app.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url, topic_root: root, discovery_prefix: prefix } });
      await connected(app);
      const escaped = mid.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      await eventually(
        () => new RegExp(`New client connected from \\S+ as mothership-${escaped} `).test(broker.output()),
        3000,
        'the broker logging our client id',
      );
    } finally {
      await app.cleanup();
      await broker.destroy();
    }
  });

  it('reconnects with backoff after the broker stops and starts again, then republishes', async () => {
    const broker = await startBroker();
    const { app, mid, root, prefix } = await mqttApp();
    try {
      await app.api('POST', '/api/persons', { id: 'ada', name: 'Ada' });
      await app.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url, topic_root: root, discovery_prefix: prefix } });
      await connected(app);
      await broker.stop('SIGKILL');
      const down = await eventually(
        async () => {
          const status = (await app.api('GET', '/api/settings/integration')).body.mqtt.status;
          return !status.connected && status.next_reconnect_at ? status : null;
        },
        3000,
        'disconnected',
      );
      assert.ok(Date.parse(down.next_reconnect_at) - Date.now() <= 400);
      assert.ok(down.last_error, 'a reason from the moment the connection is gone (outside test: it was null until an attempt failed)');
      // Several attempts fail while the broker is down (the schedule runs to its cap).
      await new Promise((resolve) => setTimeout(resolve, 900));
      await app.api('POST', '/api/events', { type: 'fall.detected', person: 'ada' });
      await broker.start();
      await connected(app);
      const retained = await eventually(
        async () => {
          const set = await retainedSet(broker.url, [`${root}/#`, `${prefix}/#`]);
          return set.get(`${root}/${mid}/availability`) === 'online' && set.has(`${root}/${mid}/fall`) ? set : null;
        },
        5000,
        'state republished after reconnect',
      );
      assert.equal(JSON.parse(retained.get(`${root}/${mid}/fall`)!).state, 'ON', 'state changed while down is there after reconnect');
      assert.ok(retained.has(`${prefix}/binary_sensor/${mid}/person_ada_presence/config`));
      const metrics = (await app.api('GET', '/metrics')).body as string;
      assert.match(metrics, /mothership_mqtt_reconnect_attempts_total [1-9]/);
    } finally {
      await app.cleanup();
      await broker.destroy();
    }
  });

  it('a broker restored from an older snapshot (its generation marker still there) gets back what it lost: missing topics republished, ghosts cleared, old payloads replaced', async () => {
    const broker = await startBroker({ persistence: true });
    const { app, mid, root, prefix } = await mqttApp();
    const filters = [`${root}/${mid}/#`, `${prefix}/+/${mid}/+/config`];
    const lastConnected = async () => (await app.api('GET', '/api/settings/integration')).body.mqtt.status.last_connected_at as string | null;
    const reconnectedSince = (before: string | null) =>
      eventually(
        async () => {
          const { status } = (await app.api('GET', '/api/settings/integration')).body.mqtt;
          return status.connected && status.last_connected_at !== before;
        },
        10_000,
        'reconnected',
      );
    const person = (id: string) => [
      `${prefix}/device_tracker/${mid}/person_${id}/config`,
      `${prefix}/binary_sensor/${mid}/person_${id}_presence/config`,
      `${prefix}/sensor/${mid}/person_${id}_room/config`,
      `${root}/${mid}/person/${id}/attributes`,
    ];
    try {
      await app.api('POST', '/api/persons', { id: 'ada', name: 'Ada' });
      await app.api('POST', '/api/persons', { id: 'bob', name: 'Bob' });
      await app.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url, topic_root: root, discovery_prefix: prefix } });
      await eventually(async () => (await retainedAll(broker.url, filters)).has(person('bob')[3]!), 5000, 'first sync');
      // A clean stop saves the broker's state, generation marker included: the snapshot.
      let before = await lastConnected();
      await broker.stop();
      await broker.start();
      await reconnectedSince(before);
      assert.equal((await app.api('POST', '/api/persons', { id: 'cy', name: 'Cy' })).status, 201);
      assert.equal((await app.api('DELETE', '/api/persons/ada')).status, 204);
      assert.equal((await app.api('PATCH', '/api/persons/bob', { name: 'Robert' })).status, 200);
      /** What the broker holds that differs from the current state. */
      const wrong = (retained: Map<string, string>) => [
        ...person('cy')
          .filter((topic) => !retained.has(topic))
          .map((topic) => `missing ${topic}`),
        ...person('ada')
          .filter((topic) => retained.has(topic))
          .map((topic) => `ghost ${topic}`),
        ...(JSON.parse(retained.get(person('bob')[0]!) ?? '{}').name === 'Robert' ? [] : ['bob not renamed']),
      ];
      const holdsCurrentState = async (what: string, timeoutMs: number) => {
        let off: string[] = [];
        await eventually(async () => (off = wrong(await retainedAll(broker.url, filters))).length === 0, timeoutMs, what).catch(() => {});
        assert.deepEqual(off, [], what);
      };
      await holdsCurrentState('the changes on the broker', 5000);
      // Killed before its next autosave, the broker starts again from the snapshot, which still has
      // the generation marker: by the marker, the broker holds what the service's record says.
      before = await lastConnected();
      await broker.stop('SIGKILL');
      await broker.start();
      await reconnectedSince(before);
      await holdsCurrentState('the broker holding the current state again', 10_000);
    } finally {
      await app.cleanup();
      await broker.destroy();
    }
  });

  it('a shutdown publishes the changes already answered before it says offline', async () => {
    const broker = await startBroker();
    const proxy = await stallingProxy(broker.port);
    const { app, mid, root, prefix } = await mqttApp();
    const ids = ['ada', 'bob', 'cy'];
    const ours = (topic: string) => ids.some((id) => topic.includes(`person_${id}`) || topic.includes(`/person/${id}/`));
    const filters = [`${root}/${mid}/#`, `${prefix}/+/${mid}/+/config`];
    try {
      for (const id of ids) await app.api('POST', '/api/persons', { id, name: id });
      await app.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: proxy.url, topic_root: root, discovery_prefix: prefix } });
      await eventually(async () => [...(await retainedAll(broker.url, filters)).keys()].filter(ours).length === 3 * 4, 5000, 'the persons on the broker');
      // The connect's sweep is over, so nothing delays the stop below before it reaches the sync.
      await eventually(
        () => new RegExp(`Client mothership-${mid}-sweep-\\S+ (disconnected|closed its connection)`).test(broker.output()),
        5000,
        'the sweep done',
      );
      // Ada's removal waits for the broker's acknowledgements; Bob's and Cy's, answered 204, wait behind it.
      proxy.holdAcknowledgements();
      for (const id of ids) assert.equal((await app.api('DELETE', `/api/persons/${id}`)).status, 204);
      const stopping = app.mqtt.stop();
      proxy.release();
      await stopping;
      const retained = await retainedAll(broker.url, filters);
      assert.deepEqual([...retained.keys()].filter(ours), [], 'every deleted person cleared');
      assert.equal(retained.get(`${root}/${mid}/availability`), 'offline');
    } finally {
      await app.cleanup();
      await proxy.close();
      await broker.destroy();
    }
  });

  it('a broker that restarts again and again, each time soon after the connect, is restarting (it lost the generation marker), not another client taking the client id: no long backoff', async () => {
    const broker = await startBroker();
    // Every reconnect is accepted (the proxy waits for the restarted broker), as a takeover's would be:
    // only the lost generation marker tells the restart.
    const proxy = await patientProxy(broker.port);
    const { app, mid, root } = await mqttApp({ MQTT_TAKEOVER_SESSION_MS: '600000', MQTT_TAKEOVER_BACKOFF_MS: '600000' });
    const marker = `${root}/${mid}/generation`;
    /** The generation marker once it differs from `previous`, or the status once the client id is taken for contested. */
    const next = (previous: string | null, what: string) =>
      eventually(
        async (): Promise<{ generation?: string; status?: { last_error: string | null } } | null> => {
          const status = (await app.api('GET', '/api/settings/integration')).body.mqtt.status;
          if (status.client_id_conflict) return { status };
          const current = (await retainedAll(broker.url, [marker])).get(marker) ?? null;
          return current !== null && current !== previous ? { generation: current } : null;
        },
        10_000,
        what,
      );
    try {
      await app.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: proxy.url, topic_root: root } });
      let seen = await next(null, 'the first generation marker');
      for (let restart = 1; restart <= CUT_SHORT_IN_A_ROW + 1; restart++) {
        await broker.stop('SIGKILL');
        await broker.start();
        seen = await next(seen.generation ?? null, `a new generation after restart ${restart}`);
        assert.equal(seen.status, undefined, `after restart ${restart}: ${seen.status?.last_error}`);
      }
    } finally {
      await app.cleanup();
      await proxy.close();
      await broker.destroy();
    }
  });

  it('a broker that keeps its retained messages and restarts again and again before the reconnect is restarting (its uptime says so), not another client taking the client id', async () => {
    // Its generation marker survives each restart (saved on SIGTERM), every reconnect is accepted (the
    // proxy waits for the broker): only the broker's uptime tells. `sys_interval 1`: it says so every second.
    const broker = await startBroker({ persistence: true, config: ['sys_interval 1'] });
    const proxy = await patientProxy(broker.port);
    const { app, root } = await mqttApp({ MQTT_TAKEOVER_SESSION_MS: '600000', MQTT_TAKEOVER_BACKOFF_MS: '600000' });
    const status = async () => (await app.api('GET', '/api/settings/integration')).body.mqtt.status;
    /** Once the broker has published its uptime live twice since now: the service's read of it, which takes the first, is done. */
    const uptimeSaid = async () => {
      const view = await observer(broker.url, ['$SYS/broker/uptime']);
      try {
        await eventually(() => view.messages.filter((message) => !message.retain).length >= 2, 10_000, 'the uptime published');
      } finally {
        await view.close();
      }
    };
    try {
      await app.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: proxy.url, topic_root: root } });
      let connectedAt = (await eventually(async () => (await status()).last_connected_at, 10_000, 'connected')) as string;
      await uptimeSaid();
      for (let restart = 1; restart <= CUT_SHORT_IN_A_ROW + 1; restart++) {
        await broker.stop();
        await broker.start();
        const reconnected = await eventually(
          async () => {
            const current = await status();
            return current.connected && current.last_connected_at !== connectedAt ? current : null;
          },
          10_000,
          `reconnected after restart ${restart}`,
        );
        assert.equal(reconnected.client_id_conflict, false, `after restart ${restart}: ${reconnected.last_error}`);
        connectedAt = reconnected.last_connected_at;
        await uptimeSaid();
      }
      assert.equal((await status()).client_id_conflict, false);
    } finally {
      await app.cleanup();
      await proxy.close();
      await broker.destroy();
    }
  });

  it('moves to another broker at run time, leaving offline on the old one', async () => {
    const first = await startBroker();
    const second = await startBroker();
    const { app, mid, root, prefix } = await mqttApp();
    try {
      await app.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: first.url, topic_root: root, discovery_prefix: prefix } });
      await connected(app);
      await app.api('POST', '/api/settings/integration', { mqtt: { broker_url: second.url } });
      await connected(app);
      await eventually(
        async () => (await retainedSet(first.url, [`${root}/${mid}/availability`])).get(`${root}/${mid}/availability`) === 'offline',
        3000,
        'offline on the old broker',
      );
      await eventually(
        async () => (await retainedSet(second.url, [`${root}/${mid}/availability`])).get(`${root}/${mid}/availability`) === 'online',
        3000,
        'online on the new broker',
      );
      await app.api('POST', '/api/settings/integration', { mqtt: { enabled: false } });
      assert.equal((await app.api('POST', '/api/settings/integration/discovery')).status, 409);
    } finally {
      await app.cleanup();
      await first.destroy();
      await second.destroy();
    }
  });

  it('connects over TLS trusting a CA made by the test, and explains a TLS failure', async () => {
    const broker = await startBroker({ tls: true });
    const { app, root, prefix } = await mqttApp();
    try {
      const untrusted = await app.api('POST', '/api/settings/integration/test', {
        target: 'mqtt',
        mqtt: { broker_url: broker.url, topic_root: root, discovery_prefix: prefix },
      });
      assert.equal(untrusted.body.mqtt.ok, false);
      assert.match(untrusted.body.mqtt.error, /^TLS error/);
      const insecure = await app.api('POST', '/api/settings/integration/test', { target: 'mqtt', mqtt: { broker_url: broker.url, tls_insecure: true } });
      assert.equal(insecure.body.mqtt.ok, true);
      const saved = await app.api('POST', '/api/settings/integration', {
        mqtt: { enabled: true, broker_url: broker.url, ca_cert: broker.caCert, topic_root: root, discovery_prefix: prefix },
      });
      assert.equal(saved.body.mqtt.ca_cert_set, true);
      assert.equal(JSON.stringify(saved.body).includes('BEGIN CERTIFICATE'), false);
      await connected(app);
      const test = await app.api('POST', '/api/settings/integration/test', { target: 'mqtt' });
      assert.equal(test.body.mqtt.ok, true, 'the stored CA is used when the form sends none');
      assert.ok(test.body.mqtt.latency_ms >= 0);
    } finally {
      await app.cleanup();
      await broker.destroy();
    }
  });

  it('authenticates with username and password, reporting bad credentials', async () => {
    const broker = await startBroker({ users: { hub: 's3cret-pass' } });
    const { app, root, prefix } = await mqttApp();
    try {
      const wrong = await app.api('POST', '/api/settings/integration/test', {
        target: 'mqtt',
        mqtt: { broker_url: broker.url, username: 'hub', password: 'nope' },
      });
      assert.equal(wrong.body.mqtt.ok, false);
      assert.match(wrong.body.mqtt.error, /not authorized|bad username or password/);
      const saved = await app.api('POST', '/api/settings/integration', {
        mqtt: { enabled: true, broker_url: broker.url, username: 'hub', password: 's3cret-pass', topic_root: root, discovery_prefix: prefix },
      });
      assert.equal(saved.body.mqtt.password_set, true);
      assert.equal(JSON.stringify(saved.body).includes('s3cret-pass'), false);
      await connected(app);
      const test = await app.api('POST', '/api/settings/integration/test', { target: 'mqtt', mqtt: { username: 'hub' } });
      assert.equal(test.body.mqtt.ok, true, 'the stored password is used when the form leaves it out');
      const row = await app.database.db.selectFrom('settings').select('value').where('key', '=', 'integration').executeTakeFirstOrThrow();
      assert.equal(row.value.includes('s3cret-pass'), false, 'encrypted at rest');
    } finally {
      await app.cleanup();
      await broker.destroy();
    }
  });

  it('saves that do not change MQTT fields leave the connection alone: no offline on the availability topic', async () => {
    const broker = await startBroker();
    const { app, mid, root, prefix } = await mqttApp();
    const availability = `${root}/${mid}/availability`;
    try {
      await app.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url, topic_root: root, discovery_prefix: prefix } });
      await connected(app);
      const view = await observer(broker.url, [availability]);
      await eventually(() => view.last(availability) === 'online', 3000, 'online');
      const saves: [string, () => Promise<unknown>][] = [
        ['webhook-only save', () => app.api('POST', '/api/settings/integration', { webhook: { enabled: false, url: 'http://127.0.0.1:1880/hook' } })],
        ['new webhook secret', () => app.api('POST', '/api/settings/integration/webhook-secret')],
        [
          'MQTT fields sent unchanged',
          () => app.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url, topic_root: root } }),
        ],
      ];
      for (const [what, save] of saves) {
        assert.equal(((await save()) as { status: number }).status, 200, what);
        await new Promise((resolve) => setTimeout(resolve, 300));
        assert.equal(view.messages.filter((message) => message.payload === 'offline').length, 0, `${what}: Home Assistant saw the service go offline`);
      }
      // A change of a connection field does reconnect.
      await app.api('POST', '/api/settings/integration', { mqtt: { username: 'someone' } });
      await eventually(() => view.messages.some((message) => message.payload === 'offline'), 3000, 'reconnect on a connection change');
      await view.close();
    } finally {
      await app.cleanup();
      await broker.destroy();
    }
  });

  it('saves that overlap are applied one at a time, the last one wins, and one client stays connected', async () => {
    const broker = await startBroker();
    const { app, mid, root } = await mqttApp();
    const roots = [`${root}a`, `${root}b`, `${root}c`];
    try {
      await app.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url, topic_root: root } });
      await connected(app);
      // Three saves at once: each would open its own connection while the previous one was closing.
      for (const next of roots) void app.api('POST', '/api/settings/integration', { mqtt: { topic_root: next } });
      await eventually(async () => (await app.api('GET', '/api/settings/integration')).body.mqtt.topic_root === roots[2], 5000, 'last save stored');
      const last = roots[2]!;
      await eventually(
        async () => (await retainedSet(broker.url, [`${last}/${mid}/availability`])).get(`${last}/${mid}/availability`) === 'online',
        5000,
        'online under the last root',
      );
      const before = broker.output().length;
      await new Promise((resolve) => setTimeout(resolve, 1500));
      assert.doesNotMatch(broker.output().slice(before), /already connected, closing old connection/, 'two clients fought over the client id');
      const retained = await retainedSet(broker.url, [`${root}/#`, `${root}a/#`, `${root}b/#`]);
      assert.deepEqual(
        [...retained.keys()].filter((topic) => topic.endsWith('/availability')),
        [],
        'nothing online under an earlier root',
      );
      assert.equal((await app.api('GET', '/api/settings/integration')).body.mqtt.status.connected, true);
    } finally {
      await app.cleanup();
      await broker.destroy();
    }
  });

  it('a new topic root or discovery prefix moves the entities: old retained topics cleared, no offline in between', async () => {
    const broker = await startBroker();
    const { app, mid, root, prefix } = await mqttApp();
    const [root2, prefix2] = [`${root}x`, `${prefix}x`];
    try {
      await app.api('POST', '/api/persons', { id: 'ada', name: 'Ada' });
      await app.api('POST', '/api/zones', { id: 'den', name: 'Den' });
      await app.api('POST', '/api/events', { type: 'zone.entry', person: 'ada', zone: 'den' });
      await app.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url, topic_root: root, discovery_prefix: prefix } });
      await connected(app);
      const view = await observer(broker.url, [`${root}/#`, `${root2}/#`, `${prefix}/#`, `${prefix2}/#`]);
      await eventually(() => view.last(`${root}/${mid}/availability`) === 'online', 3000, 'online');

      await app.api('POST', '/api/settings/integration', { mqtt: { topic_root: root2 } });
      await eventually(
        async () => {
          const set = await retainedSet(broker.url, [`${root}/#`, `${root2}/#`]);
          return [...set.keys()].every((topic) => topic.startsWith(`${root2}/`)) &&
            set.get(`${root2}/${mid}/availability`) === 'online' &&
            set.has(`${root2}/${mid}/person/ada/presence`)
            ? set
            : null;
        },
        5000,
        'state moved to the new root, nothing left under the old one',
      );
      const config = JSON.parse(
        (await retainedSet(broker.url, [`${prefix}/binary_sensor/${mid}/person_ada_presence/config`])).get(
          `${prefix}/binary_sensor/${mid}/person_ada_presence/config`,
        )!,
      );
      assert.equal(config.availability[0].topic, `${root2}/${mid}/availability`, 'the configs point at the new root');

      await app.api('POST', '/api/settings/integration', { mqtt: { discovery_prefix: prefix2 } });
      await eventually(
        async () => {
          const set = await retainedSet(broker.url, [`${prefix}/#`, `${prefix2}/#`]);
          return set.size > 0 && [...set.keys()].every((topic) => topic.startsWith(`${prefix2}/`)) ? set : null;
        },
        5000,
        'configs moved to the new prefix, none left under the old one (no ghost devices)',
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.deepEqual(
        view.messages.filter((message) => message.payload === 'offline').map((message) => message.topic),
        [],
        'Home Assistant never saw the service offline',
      );
      await view.close();
    } finally {
      await app.cleanup();
      await broker.destroy();
    }
  });

  it("switching between per-entity and device-based discovery follows HA's migration: migrate_discovery, the new form, the old topics cleared; no offline", async () => {
    const broker = await startBroker();
    const { app, mid, root, prefix } = await mqttApp();
    const entityTopics = (set: Map<string, string>) => [...set.keys()].filter((topic) => topic !== `${prefix}/device/${mid}/config`).sort();
    try {
      await app.api('POST', '/api/persons', { id: 'ada', name: 'Ada' });
      await app.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url, topic_root: root, discovery_prefix: prefix } });
      await connected(app);
      const perEntity = await eventually(
        async () => {
          const set = await retainedSet(broker.url, [`${prefix}/#`]);
          return set.size === 7 ? set : null;
        },
        5000,
        'per-entity configs',
      );
      const view = await observer(broker.url, [`${prefix}/#`, `${root}/#`]);
      await eventually(() => view.last(`${root}/${mid}/availability`) === 'online', 3000, 'online');
      view.messages.length = 0;

      await saveAndReconnect(app, { discovery_mode: 'device' });
      const device = await eventually(
        async () => {
          const set = await retainedSet(broker.url, [`${prefix}/#`]);
          return set.size === 1 && set.has(`${prefix}/device/${mid}/config`) ? set : null;
        },
        5000,
        'one device config, every per-entity config cleared',
      );
      const { cmps, device: deviceInfo, origin } = JSON.parse(device.get(`${prefix}/device/${mid}/config`)!);
      assert.ok(deviceInfo && origin);
      assert.deepEqual(
        Object.keys(cmps)
          .map((id) => `${prefix}/${cmps[id].p}/${mid}/${id}/config`)
          .sort(),
        entityTopics(perEntity),
        'the same entities, under the same discovery ids',
      );
      // The order Home Assistant needs: every old topic hands over before the new form, then it is cleared.
      const order = view.messages
        .filter((message) => message.topic.startsWith(`${prefix}/`))
        .map((message) => `${message.topic}=${message.payload === '' ? 'cleared' : message.payload.includes('migrate_discovery') ? 'migrate' : 'config'}`);
      const devicePublished = order.indexOf(`${prefix}/device/${mid}/config=config`);
      for (const topic of entityTopics(perEntity)) {
        const migrated = order.indexOf(`${topic}=migrate`);
        const cleared = order.indexOf(`${topic}=cleared`);
        assert.ok(migrated >= 0 && migrated < devicePublished && devicePublished < cleared, `${topic}: ${order.join(' ')}`);
      }
      assert.deepEqual(JSON.parse(view.messages.find((message) => message.payload.includes('migrate_discovery'))!.payload), { migrate_discovery: true });

      // In device mode, a deleted person is removed from the one config by its platform alone.
      view.messages.length = 0;
      await app.api('DELETE', '/api/persons/ada');
      const updated = await eventually(
        () => {
          const payload = view.last(`${prefix}/device/${mid}/config`);
          return payload && JSON.parse(payload).cmps.person_ada_presence?.p === 'binary_sensor' && !JSON.parse(payload).cmps.person_ada_presence.name
            ? JSON.parse(payload)
            : null;
        },
        3000,
        'device config with the person removed',
      );
      assert.deepEqual(updated.cmps.person_ada, { p: 'device_tracker' });

      // And back: the device config hands over, the per-entity configs return, the device topic is cleared.
      view.messages.length = 0;
      await saveAndReconnect(app, { discovery_mode: 'entity' });
      await eventually(
        async () => {
          const set = await retainedSet(broker.url, [`${prefix}/#`]);
          return set.size === 4 && !set.has(`${prefix}/device/${mid}/config`) ? set : null;
        },
        5000,
        'per-entity configs again (system and none for the deleted person), the device topic cleared',
      );
      const back = view.messages.filter((message) => message.topic === `${prefix}/device/${mid}/config`).map((message) => message.payload);
      assert.deepEqual(back, [JSON.stringify({ migrate_discovery: true }), ''], 'handed over, then cleared');
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.deepEqual(
        view.messages.filter((message) => message.payload === 'offline'),
        [],
        'no offline: every entity stayed available',
      );
      await view.close();
    } finally {
      await app.cleanup();
      await broker.destroy();
    }
  });

  it('the broker publishes the retained offline Last Will when the service process is killed', async () => {
    const broker = await startBroker();
    const env = await createTestEnv('sqlite', { MOTHERSHIP_ID: `ms${unique()}` });
    const root = `root${unique()}`;
    try {
      const setup = await startTestApp('sqlite', {}, { testEnv: env });
      await setup.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url, topic_root: root } });
      await setup.close();
      const topic = `${root}/${env.env.MOTHERSHIP_ID}/availability`;
      const view = await observer(broker.url, [topic]);
      const service = spawnMothership(['serve'], { ...env.env, PORT: '0' });
      try {
        await eventually(() => view.last(topic) === 'online', START_TIMEOUT_MS, `online (${service.output()})`);
        await stopProcess(service, 'SIGKILL');
        await eventually(() => view.last(topic) === 'offline', 5000, 'last will');
        const retained = await retainedSet(broker.url, [topic]);
        assert.equal(retained.get(topic), 'offline');
      } finally {
        await stopProcess(service, 'SIGKILL');
        await view.close();
      }
    } finally {
      await env.cleanup();
      await broker.destroy();
    }
  });
});

describe('MQTT ownership across instances (PostgreSQL)', () => {
  it('one instance owns the connection; when it is killed, another takes over within 10 s with online and the full state', async () => {
    const broker = await startBroker();
    const mid = `ms${unique()}`;
    const root = `root${unique()}`;
    const env = await createTestEnv('postgres', { MOTHERSHIP_ID: mid, MQTT_BACKOFF_INITIAL_MS: '100', MQTT_BACKOFF_MAX_MS: '400', LOG_LEVEL: 'silent' });
    const services: Array<Awaited<ReturnType<typeof startService>>> = [];
    try {
      const setup = await startTestApp('postgres', {}, { testEnv: env });
      await setup.api('POST', '/api/persons', { id: 'ada', name: 'Ada' });
      await setup.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url, topic_root: root } });
      await setup.close();
      const availability = `${root}/${mid}/availability`;
      const view = await observer(broker.url, [`${root}/#`]);
      for (let index = 0; index < 2; index++) services.push(await startService(env.env, await freePort()));
      const roles = async () =>
        Promise.all(
          services.map(
            async (service) =>
              ((await (await fetch(`${service.base}/readyz`)).json()) as { mqtt: { role: string; connected: boolean; leader_since: string | null } }).mqtt,
          ),
        );
      const settled = await eventually(
        async () => {
          const now = await roles();
          // The standby reports the leader's connection, as the leader reported it.
          return now.filter((entry) => entry.role === 'leader' && entry.connected).length === 1 &&
            now.filter((entry) => entry.role === 'standby' && entry.connected).length === 1
            ? now
            : null;
        },
        10_000,
        'one leader connected, one standby reporting it',
      );
      assert.ok(settled.find((entry) => entry.role === 'leader')!.leader_since);
      await eventually(() => view.last(availability) === 'online', 5000, 'online');

      const leader = services[settled.findIndex((entry) => entry.role === 'leader')]!;
      const standby = services.find((service) => service !== leader)!;
      view.messages.length = 0;
      await stopProcess(leader.child, 'SIGKILL');
      const killedAt = Date.now();
      await eventually(
        async () => {
          const state = ((await (await fetch(`${standby.base}/readyz`)).json()) as { mqtt: { role: string; connected: boolean } }).mqtt;
          return state.role === 'leader' && state.connected;
        },
        10_000,
        'the standby took over',
      );
      await eventually(() => view.last(availability) === 'online', 10_000, 'online again');
      // The broker kept the full state (the record says so): the new owner republishes only what changed.
      const adaAttributes = `${root}/${mid}/person/ada/attributes`;
      assert.deepEqual(JSON.parse((await retainedSet(broker.url, [adaAttributes])).get(adaAttributes)!), { zone: null, room: null, last_seen: null });
      assert.ok(Date.now() - killedAt < 10_000, `took over in ${Date.now() - killedAt} ms`);
      assert.equal((await retainedSet(broker.url, [availability])).get(availability), 'online', "the old owner's Last Will came before the new owner's online");
      await view.close();
    } finally {
      for (const service of services) await stopProcess(service.child, 'SIGKILL');
      await env.cleanup();
      await broker.destroy();
    }
  });
});

describe('MQTT settings validation', () => {
  it('rejects bad URLs and topic prefixes naming the field, and saves nothing', async () => {
    const app = await startTestApp('sqlite');
    try {
      const cases: [unknown, string][] = [
        [{ mqtt: { enabled: true } }, '/mqtt/broker_url'],
        [{ mqtt: { enabled: true, broker_url: 'http://x:1883' } }, '/mqtt/broker_url'],
        [{ mqtt: { broker_url: 'mqtt://host' } }, '/mqtt/broker_url'],
        [{ mqtt: { discovery_prefix: 'home/+' } }, '/mqtt/discovery_prefix'],
        [{ mqtt: { topic_root: '' } }, '/mqtt/topic_root'],
        [{ mqtt: { topic_root: 'a//b' } }, '/mqtt/topic_root'],
        [{ mqtt: { ca_cert: 'not a cert' } }, '/mqtt/ca_cert'],
        [{ mqtt: { password: 'secret' } }, '/mqtt/username'],
        [{ mqtt: { enabled: 'yes' } }, '/mqtt/enabled'],
        [{ mqtt: { colour: 'red' } }, '/mqtt/colour'],
        [{ webhook: { enabled: true } }, '/webhook/url'],
        [{ webhook: { url: 'ftp://x/' } }, '/webhook/url'],
        [{ webhook: { secret: 'plain' } }, '/webhook/secret'],
        [{ other: {} }, '/other'],
      ];
      for (const [body, path] of cases) {
        const response = await app.api('POST', '/api/settings/integration', body);
        assert.equal(response.status, 400, JSON.stringify(body));
        assert.ok(
          response.body.errors.some((error: { path: string }) => error.path === path),
          `${JSON.stringify(body)}: ${JSON.stringify(response.body.errors)}`,
        );
      }
      const settings = (await app.api('GET', '/api/settings/integration')).body;
      assert.deepEqual(settings.mqtt, {
        enabled: false,
        broker_url: '',
        username: '',
        password_set: false,
        tls: false,
        tls_insecure: false,
        ca_cert_set: false,
        client_cert_set: false,
        client_cert_subject: null,
        client_cert_expires_at: null,
        client_key_set: false,
        discovery_prefix: 'homeassistant',
        discovery_mode: 'entity',
        topic_root: 'mothership',
        birth_topic: 'homeassistant/status',
        protocol_version: '5',
        status: {
          connected: false,
          last_error: null,
          last_connected_at: null,
          next_reconnect_at: null,
          client_id_conflict: false,
          role: 'leader',
          leader_since: null,
          refused_publishes: 0,
          refused_subscriptions: 0,
          last_refusal: null,
        },
      });
      assert.deepEqual(settings.webhook, {
        enabled: false,
        url: '',
        secret_set: false,
        event_types: DEFAULT_WEBHOOK_EVENT_TYPES,
        event_types_default: true,
        previous_secret_expires_at: null,
        status: { last_delivery_at: null, last_status_code: null, last_error: null, disabled_reason: null },
      });
      const test = await app.api('POST', '/api/settings/integration/test', { target: 'mqtt' });
      assert.equal(test.status, 400);
      assert.equal(test.body.errors[0].path, '/mqtt/broker_url');
    } finally {
      await app.cleanup();
    }
  });
});

describe('mothership mqtt cleanup', () => {
  it('the same cleanup from the API (the dashboard action): 200 with the count, 400 for the own id, 409 without a broker, 502 when unreachable', async () => {
    const broker = await startBroker();
    const { app, mid, root, prefix } = await mqttApp();
    try {
      assert.equal((await app.api('POST', '/api/settings/integration/mqtt-cleanup', { installation: 'ms-old' })).status, 409, 'no broker saved');
      await app.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url, topic_root: root, discovery_prefix: prefix } });
      await connected(app);
      const seeder = await observer(broker.url, []);
      for (const topic of [`${prefix}/device/ms-old/config`, `${prefix}/sensor/ms-old/quality/config`])
        await seeder.client.publishAsync(topic, ourConfig('ms-old'), { qos: 1, retain: true });
      await seeder.client.publishAsync(`${root}/ms-old/availability`, 'offline', { qos: 1, retain: true });
      // Another integration's device whose node id happens to be the same (an ESPHome device named ms-old).
      await seeder.client.publishAsync(`${prefix}/sensor/ms-old/temperature/config`, FOREIGN_CONFIG, { qos: 1, retain: true });
      await seeder.close();
      const cleaned = await app.api('POST', '/api/settings/integration/mqtt-cleanup', { installation: 'ms-old' });
      assert.deepEqual([cleaned.status, cleaned.body], [200, { installation: 'ms-old', cleared: 3 }]);
      const retained = await retainedSet(broker.url, [`${prefix}/#`, `${root}/#`]);
      assert.deepEqual(
        [...retained.keys()].filter((topic) => topic.includes('ms-old')),
        [`${prefix}/sensor/ms-old/temperature/config`],
        "only the other integration's config is left",
      );
      assert.ok(retained.has(`${root}/${mid}/availability`), 'the live installation untouched');
      const own = await app.api('POST', '/api/settings/integration/mqtt-cleanup', { installation: mid });
      assert.deepEqual([own.status, own.body.errors?.[0]?.path], [400, '/installation']);
      assert.equal((await app.api('POST', '/api/settings/integration/mqtt-cleanup', { installation: '../#' })).status, 400);
      await broker.stop();
      const unreachable = await app.api('POST', '/api/settings/integration/mqtt-cleanup', { installation: 'ms-old' });
      assert.deepEqual([unreachable.status, unreachable.body.code], [502, 'bad_gateway']);
    } finally {
      await app.cleanup();
      await broker.destroy();
    }
  });

  it('clears what a previous installation id left retained, and nothing of the current one', async () => {
    const broker = await startBroker();
    const env = await createTestEnv('sqlite', { MOTHERSHIP_ID: 'ms-new' });
    try {
      const setup = await startTestApp('sqlite', {}, { testEnv: env });
      await setup.api('POST', '/api/settings/integration', { mqtt: { enabled: false, broker_url: broker.url } });
      await setup.close();
      const seeder = await observer(broker.url, []);
      const left = [
        'homeassistant/binary_sensor/ms-old/person_ada_presence/config',
        'homeassistant/device/ms-old/config',
        'mothership/ms-old/person/ada/presence',
        'mothership/ms-old/availability',
      ];
      const live = ['homeassistant/binary_sensor/ms-new/fall/config', 'homeassistant/device/ms-new/config', 'mothership/ms-new/availability'];
      for (const topic of [...left, ...live]) {
        const installation = topic.includes('ms-old') ? 'ms-old' : 'ms-new';
        await seeder.client.publishAsync(topic, topic.endsWith('/config') ? ourConfig(installation) : 'x', { qos: 1, retain: true });
      }
      await seeder.close();

      const run = async (...args: string[]) => {
        const child = spawnMothership(['mqtt', 'cleanup', ...args], env.env);
        const code = await new Promise((resolve) => child.once('exit', resolve));
        return { code, output: child.output() };
      };
      // Run where the service's DATA_DIR is not: no new data directory, installation id or empty settings.
      const elsewhere = mkdtempSync(path.join(tmpdir(), 'ms-elsewhere-'));
      try {
        const child = spawnMothership(['mqtt', 'cleanup', '--installation', 'ms-old'], { ...env.env, DATA_DIR: path.join(elsewhere, 'data') });
        const code = await new Promise((resolve) => child.once('exit', resolve));
        assert.equal(code, 2, child.output());
        assert.match(child.output(), /No Mothership database at .*nothing was created\. Run it where the server runs/);
        assert.deepEqual(readdirSync(elsewhere), [], 'nothing was created');
      } finally {
        rmSync(elsewhere, { recursive: true, force: true });
      }
      const own = await run('--installation', 'ms-new');
      assert.equal(own.code, 2, own.output);
      assert.match(own.output, /own id/);
      // A shell without the service's MOTHERSHIP_ID (README: it is set where the service runs): the id the
      // database was served as is still the live one, and no command of that shell records another.
      const { MOTHERSHIP_ID: _served, ...shell } = env.env;
      const inShell = async (...args: string[]) => {
        const child = spawnMothership(args, shell);
        const code = await new Promise((resolve) => child.once('exit', resolve));
        return { code, output: child.output() };
      };
      const listed = await inShell('bots', 'list');
      assert.equal(listed.code, 0, listed.output);
      assert.doesNotMatch(listed.output, /MOTHERSHIP_ID|cleanup/, 'no advice to clear the live installation');
      const served = await inShell('mqtt', 'cleanup', '--installation', 'ms-new');
      assert.equal(served.code, 2, served.output);
      assert.match(served.output, /"ms-new" is this installation's own id/);
      const database = await Database.open({ databaseUrl: null, dataDir: env.dataDir });
      try {
        assert.equal(await getSetting(database.db, 'installation.id'), 'ms-new', 'the shell recorded no other installation id');
      } finally {
        await database.close();
      }
      const cleanup = await run('--installation', 'ms-old');
      assert.equal(cleanup.code, 0, cleanup.output);
      assert.match(cleanup.output, /cleared 4 retained messages of installation ms-old/, 'both discovery forms');
      const retained = await retainedSet(broker.url, ['homeassistant/#', 'mothership/#']);
      assert.deepEqual([...retained.keys()].sort(), [...live].sort());
    } finally {
      await env.cleanup();
      await broker.destroy();
    }
  });
});
