import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { REDIS_URL, createTestEnv, eventually, startTestApp, type TestEnv } from '../helpers/app.js';
import { botRequest } from '../helpers/bot.js';
import { freePort, observer, retainedSet, startBroker } from '../helpers/broker.js';
import { REPLAY } from '../helpers/fixtures.js';
import { admin, allEvents, post, startService, stopProcess } from '../helpers/process.js';
import { startReceiver } from '../helpers/receiver.js';
import { openStream } from '../helpers/stream.js';

type Service = Awaited<ReturnType<typeof startService>>;
type MqttRole = { role: string; connected: boolean; leader_since: string | null };

const HEALTH_INTERVAL_MS = 1000;

/**
 * How many connections the broker held at once under `clientId`, read from its log (Mosquitto
 * names the client id in every connect and disconnect line), and whether it ever kicked one
 * connection for another with the same id.
 */
function connectionsOf(log: string, clientId: string) {
  let open = 0;
  let most = 0;
  let connects = 0;
  const id = clientId.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  for (const line of log.split('\n')) {
    if (new RegExp(`New client connected from \\S+ as ${id} `).test(line)) {
      connects++;
      most = Math.max(most, ++open);
    } else if (new RegExp(`Client ${id} (disconnected|closed its connection)|Socket error on client ${id},|Client ${id} has exceeded timeout`).test(line)) {
      open--;
    }
  }
  const lines = log
    .split('\n')
    .filter((line) => new RegExp(`as ${id} |Client ${id} |client ${id},`).test(line))
    .join('\n');
  return { connects, most, kicked: new RegExp(`Client ${id} already connected, closing old connection`).test(log), lines };
}

/**
 * Three real `serve` processes behind no load balancer, on one PostgreSQL database, one Redis
 * (a prefix of their own) and one private Mosquitto: to a client, any of them must act as the one
 * installation would.
 */
describe('three instances on one PostgreSQL, Redis and broker', () => {
  const mid = `ms${randomBytes(3).toString('hex')}`;
  const root = `root${randomBytes(3).toString('hex')}`;
  const clientId = `mothership-${mid}`;
  let broker: Awaited<ReturnType<typeof startBroker>>;
  let env: TestEnv;
  let services: Service[] = [];
  let view: Awaited<ReturnType<typeof observer>>;
  let bot: { id: string; shared_secret: string };
  const startedAt = Date.now();

  const roles = () => Promise.all(services.map(async (service) => ((await (await fetch(`${service.base}/readyz`)).json()) as { mqtt: MqttRole }).mqtt));
  /**
   * The instances once exactly one of them leads (connected) and the others stand by, reporting the
   * leader's connection as it reported it (every instance says the same to a client).
   */
  const settledRoles = () =>
    eventually(
      async () => {
        const now = await roles();
        const leaders = now.filter((entry) => entry.role === 'leader' && entry.connected);
        const standing = now.filter((entry) => entry.role === 'standby' && entry.connected && entry.leader_since === leaders[0]?.leader_since);
        return leaders.length === 1 && standing.length === services.length - 1 ? now : null;
      },
      10_000,
      'one leader connected, the others standing by and reporting it',
    );

  before(async () => {
    broker = await startBroker();
    env = await createTestEnv('postgres', {
      MOTHERSHIP_ID: mid,
      REDIS_URL,
      REDIS_PREFIX: `mt-${mid}:`,
      HEALTH_INTERVAL_MS: String(HEALTH_INTERVAL_MS),
      PRESENCE_AWAY_DELAY_MS: '300',
      MQTT_BACKOFF_INITIAL_MS: '100',
      MQTT_BACKOFF_MAX_MS: '400',
      WORKER: 'embedded',
    });
    const setup = await startTestApp('postgres', {}, { testEnv: env });
    await setup.api('POST', '/api/persons', { id: 'ada', name: 'Ada' });
    await setup.api('POST', '/api/zones', { id: 'kitchen', name: 'Kitchen' });
    await setup.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url, topic_root: root } });
    bot = (await setup.api('POST', '/api/bots', { id: 'shared', name: 'Shared' })).body;
    for (let i = 0; i < 10; i++) await setup.api('POST', '/api/matches', { id: `s-${i}`, status: 'completed', replay: REPLAY });
    await setup.close();
    view = await observer(broker.url, [`${root}/#`]);
    for (let index = 0; index < 3; index++) services.push(await startService(env.env, await freePort()));
  });

  after(async () => {
    for (const service of services) await stopProcess(service.child, 'SIGKILL');
    await view?.close();
    await env?.cleanup();
    await broker?.destroy();
  });

  it('one instance holds the MQTT connection, the others stand by', async () => {
    const settled = await settledRoles();
    assert.ok(settled.find((entry) => entry.role === 'leader')!.leader_since);
    await eventually(() => view.last(`${root}/${mid}/availability`) === 'online', 5000, 'online');
    const { lines, ...connections } = connectionsOf(broker.output(), clientId);
    assert.deepEqual(connections, { connects: 1, most: 1, kicked: false }, lines);
    // The dashboard's status, on whichever instance serves it.
    for (const service of services) {
      const status = ((await (await fetch(`${service.base}/api/settings/integration`, { headers: admin })).json()) as { mqtt: { status: MqttRole } }).mqtt
        .status;
      assert.equal(status.connected, true, service.base);
    }
  });

  it('settings saved on one instance are applied by all: the webhook at once, MQTT by the leader', async () => {
    const receiver = await startReceiver();
    try {
      const standby = services[(await roles()).findIndex((entry) => entry.role === 'standby')]!;
      assert.equal((await post(standby.base, '/api/settings/integration', { webhook: { enabled: true, url: receiver.url } })).status, 200);
      // Events accepted right after the save, on every instance, are all delivered.
      for (const [index, service] of services.entries())
        assert.equal((await post(service.base, '/api/events', { type: 'anomaly.detected', detail: { via: index } })).status, 202);
      await eventually(
        () => {
          const via = receiver.received
            .map((request) => JSON.parse(request.body))
            .filter((body) => body.event_type === 'anomaly.detected')
            .map((body) => body.detail.via);
          return [0, 1, 2].every((index) => via.includes(index));
        },
        10_000,
        'the events of all three instances delivered',
      );

      // A discovery prefix saved on a standby: the leader republishes discovery under it.
      const prefix = `disc${randomBytes(3).toString('hex')}`;
      const discovery = await observer(broker.url, [`${prefix}/#`]);
      try {
        assert.equal((await post(standby.base, '/api/settings/integration', { mqtt: { discovery_prefix: prefix } })).status, 200);
        await eventually(
          () => discovery.messages.some((message) => message.topic.startsWith(`${prefix}/`) && message.topic.endsWith('/config')),
          5000,
          'discovery under the new prefix',
        );
      } finally {
        await discovery.close();
      }
      await post(standby.base, '/api/settings/integration', { webhook: { enabled: false } });
    } finally {
      await receiver.close();
    }
  });

  it('the stream of one instance shows the events ingested on another', async () => {
    const stream = await openStream(services[0]!.base);
    try {
      const marker = randomBytes(4).toString('hex');
      await post(services[1]!.base, '/api/events', { type: 'anomaly.detected', detail: { marker, via: 1 } });
      await post(services[2]!.base, '/api/events', { type: 'anomaly.detected', detail: { marker, via: 2 } });
      await eventually(() => stream.events.filter((event) => event.detail.marker === marker).length === 2, 5000, 'both events on the stream of instance 0');
    } finally {
      await stream.close();
    }
  });

  it('changes made through a standby reach the broker (the leader follows the shared log, not its own process)', async () => {
    const states = await roles();
    const standby = services[states.findIndex((entry) => entry.role === 'standby')]!;
    assert.equal((await post(standby.base, '/api/persons', { id: 'bo', name: 'Bo' })).status, 201);
    assert.equal((await post(standby.base, '/api/events', { type: 'zone.entry', person: 'bo', zone: 'kitchen' })).status, 202);
    const mode = await fetch(`${standby.base}/api/system/mode`, {
      method: 'PUT',
      headers: { ...admin, 'content-type': 'application/json' },
      body: JSON.stringify({ mode: 'sleep' }),
    });
    assert.equal(mode.status, 200);
    await eventually(
      () =>
        view.last(`${root}/${mid}/person/bo/presence`) === 'home' &&
        view.last(`${root}/${mid}/person/bo/tracker`) === 'home' &&
        view.last(`${root}/${mid}/system/mode`) === 'sleep',
      5000,
      "the standby's changes on the broker",
    );
    const configs = await retainedSet(broker.url, [`+/+/${mid}/+/config`]);
    assert.ok(
      [...configs.keys()].some((topic) => topic.endsWith(`/device_tracker/${mid}/person_bo/config`)),
      [...configs.keys()].join('\n'),
    );

    // The dashboard's MQTT actions answer on a standby as on the owner.
    const discovery = await observer(broker.url, [`+/+/${mid}/+/config`]);
    try {
      const response = await post(standby.base, '/api/settings/integration/discovery', {});
      const published = (await response.json()) as { published: number };
      assert.equal(response.status, 200, JSON.stringify(published));
      assert.ok(published.published >= 4, JSON.stringify(published));
      await eventually(() => discovery.messages.filter((message) => !message.retain).length >= published.published, 5000, 'the configs republished');
    } finally {
      await discovery.close();
    }
    const cleanup = await post(standby.base, '/api/settings/integration/mqtt-cleanup', { installation: 'formerid' });
    assert.equal(cleanup.status, 200, await cleanup.text());
    const { lines, ...connections } = connectionsOf(broker.output(), clientId);
    assert.equal(connections.most, 1, lines);
  });

  it('presence and health happen once for the installation, not once per instance', async () => {
    assert.equal((await post(services[1]!.base, '/api/events', { type: 'zone.entry', person: 'ada', zone: 'kitchen' })).status, 202);
    assert.equal((await post(services[2]!.base, '/api/events', { type: 'zone.exit', person: 'ada', zone: 'kitchen' })).status, 202);
    await eventually(
      async () => ((await (await fetch(`${services[0]!.base}/api/persons/ada`, { headers: admin })).json()) as { presence: string }).presence === 'not_home',
      5000,
      'not_home',
    );
    // Past several away sweeps of every instance.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const changes = (await allEvents(services[0]!.base, 'presence.changed')).filter((event) => event.person === 'ada').map((event) => event.detail.to);
    assert.deepEqual(changes, ['home', 'not_home']);

    const health = await allEvents(services[0]!.base, 'system.health');
    const elapsed = Date.now() - startedAt;
    // Once per interval (a claim waits at least 0.9 of it): three instances each reporting would be three times as many.
    assert.ok(health.length >= 2 && health.length <= Math.floor(elapsed / (0.9 * HEALTH_INTERVAL_MS)) + 1, `${health.length} reports in ${elapsed} ms`);
    // Not the gaps between the reports' timestamps: a busy machine stretches each one's time from claim
    // to write (the claims' spacing is db.test.ts's).
  });

  it('enrichment: 60 concurrent requests of one bot over three instances enqueue 5 jobs, each processed once', async () => {
    const responses = await Promise.all(
      Array.from({ length: 60 }, (_, i) => botRequest(services[i % 3]!.base, bot, 'POST', '/api/request-enrichment', { match_id: `s-${i % 10}` })),
    );
    const statuses = responses.map((response) => response.status);
    assert.ok(
      statuses.every((status) => status === 202 || status === 429),
      String(statuses),
    );
    const fresh = responses.filter((response) => response.status === 202 && !response.body.duplicate).map((response) => response.body.match_id as string);
    assert.equal(fresh.length, 5);
    assert.equal(new Set(fresh).size, 5);
    const completed = await eventually(
      async () => {
        const events = await allEvents(services[0]!.base, 'enrichment.completed');
        return events.length >= 5 ? events : null;
      },
      20_000,
      'five jobs completed',
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    const again = await allEvents(services[0]!.base, 'enrichment.completed');
    assert.equal(again.length, 5, 'each job completed once');
    assert.deepEqual(completed.map((event) => event.detail.match_id).sort(), [...fresh].sort());
    assert.ok(
      again.every((event) => event.detail.attempts === 1),
      'no job was claimed twice',
    );
  });

  it('the leader killed with SIGKILL: another instance takes over within 10 s with the retained state intact, one connection at a time', async () => {
    await settledRoles();
    const retainedBefore = await retainedSet(broker.url, [`${root}/#`]);
    const leaderIndex = (await roles()).findIndex((entry) => entry.role === 'leader');
    const leader = services[leaderIndex]!;
    const connectsBefore = connectionsOf(broker.output(), clientId).connects;
    await stopProcess(leader.child, 'SIGKILL');
    const killedAt = Date.now();
    services = services.filter((service) => service !== leader);
    // Deleted while no instance owns MQTT: no one publishes its cleared state, the next owner must find it.
    const deleted = await fetch(`${services[0]!.base}/api/persons/bo`, { method: 'DELETE', headers: admin });
    assert.equal(deleted.status, 204);
    const bo = `${root}/${mid}/person/bo/`;
    await settledRoles();
    await eventually(
      () =>
        view.last(`${root}/${mid}/availability`) === 'online' &&
        view.messages.filter((message) => message.topic === `${root}/${mid}/availability`).at(-2)?.payload === 'offline',
      10_000,
      'the Last Will, then online again',
    );
    assert.ok(Date.now() - killedAt < 10_000, `took over in ${Date.now() - killedAt} ms`);
    assert.equal([...retainedBefore.keys()].filter((topic) => topic.startsWith(bo)).length, 3);
    const retainedAfter = await eventually(
      async () => {
        const retained = await retainedSet(broker.url, [`${root}/#`]);
        return [...retained.keys()].some((topic) => topic.startsWith(bo)) ? null : retained;
      },
      8000,
      "the deleted person's retained state cleared",
    );
    const health = `${root}/${mid}/system/health`;
    const kept = [...retainedBefore.keys()].filter((topic) => !topic.startsWith(bo));
    const kitchen = `${root}/${mid}/zone/kitchen/occupancy`;
    assert.deepEqual(JSON.parse(retainedAfter.get(kitchen)!).occupants, [], 'the kitchen without the deleted person');
    for (const topic of kept) {
      if (topic !== health && topic !== kitchen) assert.equal(retainedAfter.get(topic), retainedBefore.get(topic), topic);
    }
    assert.deepEqual([...retainedAfter.keys()].sort(), kept.sort());
    const { lines, ...connections } = connectionsOf(broker.output(), clientId);
    // One new connection, by the new leader; never two at once, never one kicked for another.
    assert.deepEqual(connections, { connects: connectsBefore + 1, most: 1, kicked: false }, lines);
  });

  it('a frozen leader (SIGSTOP) loses MQTT to another instance within 10 s; resumed, it stands by', async () => {
    await settledRoles();
    const leader = services[(await roles()).findIndex((entry) => entry.role === 'leader')]!;
    const others = services.filter((service) => service !== leader);
    const connectsBefore = connectionsOf(broker.output(), clientId).connects;
    // Its database session and its broker connection stay open: only PostgreSQL's idle-session timeout ends its lock.
    leader.child.kill('SIGSTOP');
    const frozenAt = Date.now();
    try {
      await eventually(
        async () => {
          const now = await Promise.all(others.map(async (service) => ((await (await fetch(`${service.base}/readyz`)).json()) as { mqtt: MqttRole }).mqtt));
          return now.some((entry) => entry.role === 'leader' && entry.connected) ? now : null;
        },
        15_000,
        'another instance leads',
      );
      assert.ok(Date.now() - frozenAt < 10_000, `took over in ${Date.now() - frozenAt} ms`);
    } finally {
      leader.child.kill('SIGCONT');
    }
    await settledRoles();
    await eventually(() => view.last(`${root}/${mid}/availability`) === 'online', 5000, 'online');
    await new Promise((resolve) => setTimeout(resolve, 2000)); // the resumed instance does not connect again
    const { lines, ...connections } = connectionsOf(broker.output(), clientId);
    // The new leader's connection replaced the frozen one's (the broker could not know it was gone), and no other came.
    assert.equal(connections.connects, connectsBefore + 1, lines);
    assert.equal((await retainedSet(broker.url, [`${root}/${mid}/availability`])).get(`${root}/${mid}/availability`), 'online');
  });
});
