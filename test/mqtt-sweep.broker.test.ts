import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { clearInstallation } from '../src/mqtt/cleanup.js';
import { allConfigs, payloadText } from '../src/mqtt/discovery.js';
import { personState, zoneState } from '../src/mqtt/state.js';
import { Topics } from '../src/mqtt/topics.js';
import { DEFAULT_SETTINGS } from '../src/settings/index.js';
import { eventually, startTestApp, type TestApp } from './helpers/app.js';
import { observer, retainedAll, startBroker } from './helpers/broker.js';

/** Runs `work` over `items`, `width` at a time. */
async function inBatches<T>(items: T[], width: number, work: (item: T) => Promise<unknown>): Promise<void> {
  for (let start = 0; start < items.length; start += width) await Promise.all(items.slice(start, start + width).map(work));
}

/**
 * What others leave retained under the service's own topics, on a broker with its default
 * configuration (it queues at most 1,000 messages for a client and drops the rest).
 */
describe('MQTT: foreign retained messages under the service topics, at any number', () => {
  const id = randomBytes(4).toString('hex');
  const [mid, root, prefix] = [`ms${id}`, `root${id}`, `ha${id}`];
  const base = `${root}/${mid}`;
  let broker: Awaited<ReturnType<typeof startBroker>>;
  let app: TestApp;

  before(async () => {
    broker = await startBroker();
    // What an older release left under the topic root (topics this release does not publish), and a
    // retained mode command someone left: the ghosts go, the command is not the service's to clear.
    const older = await observer(broker.url, []);
    for (const topic of [`${base}/person/ada/state`, `${base}/zone/attic/occupancy`, `${base}/legacy/anything`])
      await older.client.publishAsync(topic, 'old', { qos: 1, retain: true });
    await older.client.publishAsync(`${base}/system/mode/set`, 'away', { qos: 1, retain: true });
    await older.close();
    app = await startTestApp('sqlite', { MOTHERSHIP_ID: mid, MQTT_BACKOFF_INITIAL_MS: '100', MQTT_BACKOFF_MAX_MS: '400' }, { start: true });
    await app.api('POST', '/api/persons', { id: 'ada', name: 'Ada' });
    const saved = await app.api('POST', '/api/settings/integration', {
      mqtt: { enabled: true, broker_url: broker.url, topic_root: root, discovery_prefix: prefix },
    });
    assert.equal(saved.status, 200, JSON.stringify(saved.body));
  });
  after(async () => {
    await app?.cleanup();
    await broker?.destroy();
  });

  it('clears the retained state topics an older release left under its root, and keeps availability, the generation marker and commands', async () => {
    const retained = await eventually(
      async () => {
        const set = await retainedAll(broker.url, [`${base}/#`]);
        const ghosts = [`${base}/person/ada/state`, `${base}/zone/attic/occupancy`, `${base}/legacy/anything`].filter((topic) => set.has(topic));
        return set.has(`${base}/person/ada/attributes`) && ghosts.length === 0 ? set : null;
      },
      10_000,
      'the older release ghosts cleared',
    );
    assert.equal(retained.get(`${base}/availability`), 'online');
    assert.ok(retained.has(`${base}/generation`));
    assert.equal(retained.get(`${base}/system/mode/set`), 'away');
  });

  it('corrects 10,000 fake retained configs published under its discovery topics while it is connected', async () => {
    const fakes = Array.from({ length: 10_000 }, (_, index) => `${prefix}/binary_sensor/${mid}/fake_${index}/config`);
    const intruder = await observer(broker.url, []);
    try {
      await inBatches(fakes, 500, (topic) => intruder.client.publishAsync(topic, JSON.stringify({ name: 'Fake', state_topic: 'x' }), { qos: 1, retain: true }));
    } finally {
      await intruder.close();
    }
    const left = (set: Map<string, string>) => [...set.keys()].filter((topic) => topic.includes('/fake_')).length;
    await eventually(async () => left(await retainedAll(broker.url, [`${prefix}/#`])) === 0, 60_000, 'every fake cleared').catch(async (error: Error) => {
      throw new Error(`${error.message}: ${left(await retainedAll(broker.url, [`${prefix}/#`]))} of ${fakes.length} fakes left`);
    });
    const ours = await retainedAll(broker.url, [`${prefix}/#`]);
    assert.ok(ours.has(`${prefix}/binary_sensor/${mid}/person_ada_presence/config`), 'its own configs stay');
  });
});

describe('mothership mqtt cleanup, at building size on a broker with its default configuration', () => {
  it("clears every retained message 5,000 persons' and 500 zones' installation left, and nothing else", async () => {
    const broker = await startBroker();
    try {
      const settings = { ...DEFAULT_SETTINGS.mqtt, enabled: true, broker_url: broker.url };
      const old = new Topics(settings.topic_root, 'ms-old', settings.discovery_prefix);
      const persons = Array.from({ length: 5000 }, (_, index) => ({
        id: `p${index}`,
        name: `Person ${index}`,
        presence: 'home' as const,
        zone: `z${index % 500}`,
        last_seen: null,
      }));
      const zones = Array.from({ length: 500 }, (_, index) => ({ id: `z${index}`, name: `Room ${index}`, count: 10, occupied: true, occupants: [] }));
      // What that installation published: its entity configs, its states, its availability and generation marker.
      const left: [string, string][] = [
        ...allConfigs({ topics: old, version: '0.2.0' }, persons, zones).map((message): [string, string] => [message.topic, payloadText(message)]),
        ...persons.flatMap((person) => personState(old, person, null)),
        ...zones.map((zone) => zoneState(old, zone)),
        [old.availability, 'offline'],
        [old.generation, 'g1'],
      ];
      // Another integration's device whose node id happens to be the same, and a live installation.
      const kept: [string, string][] = [
        [`${settings.discovery_prefix}/sensor/ms-old/temperature/config`, JSON.stringify({ name: 'Temperature', device: { identifiers: ['esphome_ms-old'] } })],
        [`${settings.topic_root}/ms-new/availability`, 'online'],
      ];
      const seeder = await observer(broker.url, []);
      try {
        await inBatches([...left, ...kept], 500, ([topic, payload]) => seeder.client.publishAsync(topic, payload, { qos: 1, retain: true }));
      } finally {
        await seeder.close();
      }
      const filters = [`${settings.discovery_prefix}/#`, `${settings.topic_root}/#`];
      assert.equal((await retainedAll(broker.url, filters)).size, left.length + kept.length, 'seeded');

      const { cleared } = await clearInstallation(settings, 'mothership-test-cleanup', 'ms-old');
      const retained = await retainedAll(broker.url, filters);
      const leftover = left.filter(([topic]) => retained.has(topic)).map(([topic]) => topic);
      assert.equal(leftover.length, 0, `${leftover.length} of ${left.length} left, such as ${leftover.slice(0, 3).join(', ')}`);
      assert.deepEqual([...retained.keys()].sort(), kept.map(([topic]) => topic).sort(), 'the others stay');
      assert.equal(cleared, left.length);
    } finally {
      await broker.destroy();
    }
  });
});
