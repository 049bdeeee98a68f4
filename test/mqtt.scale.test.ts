import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createTestEnv, eventually, startTestApp, type TestApp } from './helpers/app.js';
import { freePort, observer, retainedAll, stallingProxy, startBroker } from './helpers/broker.js';
import { post, startService, stopProcess } from './helpers/process.js';

const unique = () => randomBytes(4).toString('hex');

/** Runs `work` over `items`, `width` at a time. */
async function inBatches<T>(items: T[], width: number, work: (item: T) => Promise<unknown>): Promise<void> {
  for (let start = 0; start < items.length; start += width) await Promise.all(items.slice(start, start + width).map(work));
}

async function connected(app: TestApp, timeoutMs = 10_000) {
  await eventually(async () => (await app.api('GET', '/api/settings/integration')).body.mqtt.status.connected === true, timeoutMs, 'MQTT connected');
}

/** Where the broker's retained person state differs from what the service's API says (presence, zone, last seen). */
async function stateDifferences(app: TestApp, url: string, base: string): Promise<string[]> {
  const retained = await retainedAll(url, [`${base}/person/#`]);
  const wrong: string[] = [];
  for (const person of (await app.api('GET', '/api/persons')).body) {
    const presence = retained.get(`${base}/person/${person.id}/presence`);
    const { zone, last_seen } = JSON.parse(retained.get(`${base}/person/${person.id}/attributes`) ?? '{}');
    // Before a person's first entry or exit the API says `unknown` and MQTT retains no presence.
    const published = person.presence === 'unknown' ? undefined : person.presence;
    if (presence !== published || zone !== person.zone || last_seen !== person.last_seen)
      wrong.push(`${person.id}: ${presence} in ${zone} at ${last_seen} instead of ${published} in ${person.zone} at ${person.last_seen}`);
  }
  return wrong;
}

describe('MQTT at building scale, on a broker with its default configuration', () => {
  for (const dialect of ['sqlite', 'postgres'] as const) {
    it(`${dialect}: 2,000 persons deleted while MQTT was off leave nothing retained after the reconnect`, async () => {
      const broker = await startBroker();
      const [mid, root, prefix] = [`ms${unique()}`, `root${unique()}`, `ha${unique()}`];
      const app = await startTestApp(dialect, { MOTHERSHIP_ID: mid, MQTT_BACKOFF_INITIAL_MS: '100', MQTT_BACKOFF_MAX_MS: '400' }, { start: true });
      const ids = Array.from({ length: 2000 }, (_, index) => `p${index}`);
      const personTopics = (set: Map<string, string>) => [...set.keys()].filter((topic) => topic.includes('/person/') || topic.includes('/person_'));
      const filters = [`${root}/#`, `${prefix}/#`];
      try {
        await app.api('POST', '/api/zones', { id: 'hall', name: 'Hall' });
        // Written straight to the tables: how they got there is not what is tested, and 4,000 API
        // calls would take most of the test's time on PostgreSQL.
        const at = new Date().toISOString();
        const rows = ids.map((id, index) => ({
          id,
          name: id,
          presence: index < 200 ? ('home' as const) : ('not_home' as const),
          zone_id: index < 200 ? 'hall' : null,
          last_seen: index < 200 ? at : null,
          left_at: null,
          created_at: at,
        }));
        await app.database.transaction(async (trx) => {
          for (let start = 0; start < rows.length; start += 500)
            await trx
              .insertInto('persons')
              .values(rows.slice(start, start + 500))
              .execute();
        });
        await app.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url, topic_root: root, discovery_prefix: prefix } });
        await connected(app);
        const count = (set: Map<string, string>, leaf: string) =>
          [...set.keys()].filter((topic) => topic.endsWith(`/${leaf}`) && topic.includes('/person/')).length;
        const published = await eventually(
          async () => {
            const retained = await retainedAll(broker.url, filters);
            // Every person's attributes; a presence only for the 200 seen (the others are `unknown`).
            const complete = count(retained, 'attributes') === ids.length && count(retained, 'presence') === 200;
            return complete && retained.has(`${root}/${mid}/system/health`) ? retained : null;
          },
          30_000,
          'every person published',
        );
        const perPerson = personTopics(published).length / ids.length;

        await app.api('POST', '/api/settings/integration', { mqtt: { enabled: false } });
        await app.database.transaction((trx) => trx.deleteFrom('persons').execute());
        await app.api('POST', '/api/settings/integration', { mqtt: { enabled: true } });
        await connected(app);
        const left = await eventually(
          async () => {
            const retained = await retainedAll(broker.url, filters);
            return retained.get(`${root}/${mid}/availability`) === 'online' && personTopics(retained).length === 0 ? retained : null;
          },
          20_000,
          'no retained config or state of a deleted person',
        ).catch(async (error: Error) => {
          const remaining = personTopics(await retainedAll(broker.url, filters)).length;
          throw new Error(`${error.message}: ${remaining} of ${perPerson * ids.length} retained topics of deleted persons left`);
        });
        assert.deepEqual(JSON.parse(left.get(`${root}/${mid}/zone/hall/occupancy`)!), { count: 0, occupied: false, occupants: [] });
      } finally {
        await app.cleanup();
        await broker.destroy();
      }
    });
  }

  it('a sync the broker is slow to acknowledge never publishes an older state over a newer one', async () => {
    const broker = await startBroker();
    const proxy = await stallingProxy(broker.port);
    const [mid, root, prefix] = [`ms${unique()}`, `root${unique()}`, `ha${unique()}`];
    const app = await startTestApp('sqlite', { MOTHERSHIP_ID: mid, MQTT_BIRTH_DELAY_MAX_MS: '0' }, { start: true });
    const ids = Array.from({ length: 40 }, (_, index) => `p${index}`);
    const base = `${root}/${mid}`;
    const configs = await observer(broker.url, [`${prefix}/#`]);
    try {
      await app.api('POST', '/api/zones', { id: 'kitchen', name: 'Kitchen' });
      for (const id of ids) await app.api('POST', '/api/persons', { id, name: id });
      await app.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: proxy.url, topic_root: root, discovery_prefix: prefix } });
      await connected(app);
      await eventually(async () => (await stateDifferences(app, broker.url, base)).length === 0, 10_000, 'the first sync');

      // Home Assistant restarts: a full sync, whose acknowledgements after `online`'s the broker holds
      // back for longer than any acknowledgement timeout; meanwhile every person moves.
      proxy.holdAcknowledgements(1);
      configs.messages.length = 0;
      await configs.client.publishAsync('homeassistant/status', 'online', { qos: 1 });
      await eventually(() => configs.messages.length > 0, 5000, 'the sync under way');
      await inBatches(ids, 10, (person) => app.api('POST', '/api/events', { type: 'zone.entry', person, zone: 'kitchen' }));
      await new Promise((resolve) => setTimeout(resolve, 12_000)); // the broker's stall (the fault injected), not a wait for a condition
      proxy.release();

      await eventually(async () => (await stateDifferences(app, broker.url, base)).length === 0, 10_000, 'the moves on the broker');
      // An older writer still running would overwrite them right after the stall: they must stay.
      await new Promise((resolve) => setTimeout(resolve, 1000));
      assert.deepEqual(await stateDifferences(app, broker.url, base), [], 'retained state older than the database');
    } finally {
      await configs.close();
      await app.cleanup();
      await proxy.close();
      await broker.destroy();
    }
  });

  it('a service (re)started onto thousands of retained configs under its discovery topics syncs and keeps publishing (the broker would drop its acknowledgements)', async () => {
    const broker = await startBroker();
    const [root, prefix] = [`root${unique()}`, `ha${unique()}`];
    const env = await createTestEnv('sqlite', { MOTHERSHIP_ID: `ms${unique()}`, MQTT_BACKOFF_INITIAL_MS: '100', MQTT_BACKOFF_MAX_MS: '400' });
    const mid = env.env.MOTHERSHIP_ID!;
    const base = `${root}/${mid}`;
    const intruder = await observer(broker.url, []);
    let service: Awaited<ReturnType<typeof startService>> | null = null;
    try {
      const setup = await startTestApp('sqlite', {}, { testEnv: env });
      await setup.api('POST', '/api/persons', { id: 'ada', name: 'Ada' });
      await setup.api('POST', '/api/zones', { id: 'kitchen', name: 'Kitchen' });
      await setup.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url, topic_root: root, discovery_prefix: prefix } });
      await setup.close();
      // What a large installation's own configs (or a flood of fakes) leave retained: far more than
      // the broker queues for one client (max_queued_messages, 1000 by default).
      const stale = Array.from({ length: 16_000 }, (_, index) => `${prefix}/sensor/${mid}/stale_${index}/config`);
      await inBatches(stale, 500, (topic) =>
        intruder.client.publishAsync(topic, JSON.stringify({ name: 'Stale', state_topic: 'x'.repeat(600) }), { qos: 1, retain: true }),
      );
      await intruder.client.publishAsync(`${base}/availability`, '', { qos: 1, retain: true });
      const view = await observer(broker.url, [`${base}/availability`, `${base}/person/ada/presence`]);
      try {
        service = await startService(env.env, await freePort());
        await eventually(() => view.last(`${base}/availability`) === 'online', 15_000, 'online');
        // A change after the connect reaches the broker: the one writer is not stuck on a lost acknowledgement.
        await post(service.base, '/api/events', { type: 'zone.entry', person: 'ada', zone: 'kitchen' });
        await eventually(() => view.last(`${base}/person/ada/presence`) === 'home', 15_000, 'the change published');
      } finally {
        await view.close();
      }
    } finally {
      if (service) await stopProcess(service.child, 'SIGKILL');
      await intruder.close();
      await env.cleanup();
      await broker.destroy();
    }
  });
});
