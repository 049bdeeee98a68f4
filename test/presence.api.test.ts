import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CompiledQuery, sql } from 'kysely';
import pg from 'pg';
import { othersInZone } from '../src/presence/index.js';
import { createTestEnv, DIALECTS, eventually, lockWaiter, startTestApp, type TestApp } from './helpers/app.js';

for (const dialect of DIALECTS) {
  describe(`presence API (${dialect})`, () => {
    let app: TestApp;
    before(async () => {
      // Short enough to wait for, long enough that a busy machine's requests (some took over 300 ms at
      // load 13) do not outlast them between two steps of a test.
      app = await startTestApp(dialect, { PRESENCE_AWAY_DELAY_MS: '1000', NODE_TIMEOUT_MS: '1500' }, { start: true });
    });
    after(() => app.cleanup());

    it('creates persons and zones, deriving unique ids from names', async () => {
      const ada = await app.api('POST', '/api/persons', { name: 'Ada Lovelace' });
      assert.equal(ada.status, 201);
      assert.deepEqual(ada.body, { id: 'ada-lovelace', name: 'Ada Lovelace', presence: 'unknown', zone: null, last_seen: null });
      const twin = await app.api('POST', '/api/persons', { name: 'Ada  Lovelace!' });
      assert.equal(twin.body.id, 'ada-lovelace-2');
      const bob = await app.api('POST', '/api/persons', { id: 'bob', name: 'Bob' });
      assert.equal(bob.body.id, 'bob');
      const duplicate = await app.api('POST', '/api/persons', { id: 'bob', name: 'Other Bob' });
      assert.equal(duplicate.status, 409);
      assert.equal(duplicate.body.code, 'conflict');
      for (const name of ['Kitchen', 'Living Room', 'Garden']) {
        assert.equal((await app.api('POST', '/api/zones', { name })).status, 201);
      }
      const zones = await app.api('GET', '/api/zones');
      assert.deepEqual(
        zones.body.map((zone: { id: string }) => zone.id),
        ['garden', 'kitchen', 'living-room'],
      );
    });

    it('rejects bad ids, unknown fields and wrong types naming the field, and changes nothing', async () => {
      const before = (await app.api('GET', '/api/persons')).body;
      const cases: [unknown, string][] = [
        [{ id: 'Bad Id', name: 'x' }, '/id'],
        [{ id: 'a'.repeat(65), name: 'x' }, '/id'],
        [{ id: 'a/b', name: 'x' }, '/id'],
        [{ name: 'x', colour: 'red' }, '/colour'],
        [{ name: 42 }, '/name'],
        [{}, '/name'],
        [{ name: '' }, '/name'],
      ];
      for (const [body, path] of cases) {
        const response = await app.api('POST', '/api/persons', body);
        assert.equal(response.status, 400, JSON.stringify(body));
        assert.equal(response.headers['content-type'], 'application/problem+json; charset=utf-8');
        assert.equal(response.body.code, 'validation_failed');
        assert.ok(
          response.body.errors.some((error: { path: string }) => error.path === path),
          `${JSON.stringify(body)} -> ${JSON.stringify(response.body.errors)}`,
        );
      }
      assert.deepEqual((await app.api('GET', '/api/persons')).body, before);
    });

    it('moves a person between zones: entry leaves the previous zone and makes them home', async () => {
      const entry = await app.api('POST', '/api/events', { type: 'zone.entry', person: 'ada-lovelace', zone: 'kitchen', blob_id: 'blob-1' });
      assert.equal(entry.status, 202);
      assert.equal(entry.body.event.event_type, 'zone.entry');
      assert.equal(entry.body.event.person, 'ada-lovelace');
      assert.equal(entry.body.event.zone, 'kitchen');
      assert.equal(entry.body.event.blob_id, 'blob-1');
      assert.equal(entry.body.event.severity, 'info');
      assert.match(entry.body.event.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.deepEqual(entry.body.event.detail, { from_zone: null, already_inside: false, count: 1 });

      let person = (await app.api('GET', '/api/persons/ada-lovelace')).body;
      assert.equal(person.presence, 'home');
      assert.equal(person.zone, 'kitchen');
      assert.ok(person.last_seen);

      await app.api('POST', '/api/events', { type: 'zone.entry', person: 'bob', zone: 'kitchen' });
      await app.api('POST', '/api/events', { type: 'zone.entry', person: 'ada-lovelace', zone: 'garden' });
      const kitchen = (await app.api('GET', '/api/zones/kitchen')).body;
      assert.deepEqual(kitchen, { id: 'kitchen', name: 'Kitchen', count: 1, occupied: true, occupants: ['bob'] });
      const garden = (await app.api('GET', '/api/zones/garden')).body;
      assert.deepEqual(garden.occupants, ['ada-lovelace']);
      person = (await app.api('GET', '/api/persons/ada-lovelace')).body;
      assert.equal(person.zone, 'garden');

      const history = (await app.api('GET', '/api/events?limit=1000')).body.events;
      const types = history.filter((event: { person: string }) => event.person === 'ada-lovelace').map((event: { event_type: string }) => event.event_type);
      assert.deepEqual(
        types.filter((type: string) => type !== 'person.created'),
        ['zone.entry', 'presence.changed', 'zone.exit', 'zone.entry'],
      );
    });

    it('makes a person not_home only after the away delay in no zone', async () => {
      await app.api('POST', '/api/events', { type: 'zone.exit', person: 'ada-lovelace', zone: 'garden' });
      const person = (await app.api('GET', '/api/persons/ada-lovelace')).body;
      assert.equal(person.zone, null);
      assert.equal(person.presence, 'home', 'still home during the away delay');
      await eventually(async () => (await app.api('GET', '/api/persons/ada-lovelace')).body.presence === 'not_home', 10_000, 'not_home');
      const events = (await app.api('GET', '/api/events?limit=1000')).body.events;
      const last = events.filter((event: { person: string }) => event.person === 'ada-lovelace').at(-1);
      assert.equal(last.event_type, 'presence.changed');
      assert.deepEqual(last.detail, { from: 'home', to: 'not_home' });
    });

    it('re-entering within the away delay keeps the person home without a presence change', async () => {
      const before = (await app.api('GET', '/api/events?order=desc&limit=1')).body.last_seq;
      await app.api('POST', '/api/events', { type: 'zone.exit', person: 'bob', zone: 'kitchen' });
      assert.equal((await app.api('GET', '/api/persons/bob')).body.presence, 'home', 'still home right after the exit');
      await app.api('POST', '/api/events', { type: 'zone.entry', person: 'bob', zone: 'kitchen' });
      // Wait past the away delay (1 s) and several sweeps: a pending not_home must have been cancelled.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      assert.equal((await app.api('GET', '/api/persons/bob')).body.presence, 'home');
      const since = (await app.api('GET', `/api/events?after=${before}&limit=1000`)).body.events as Array<{ event_type: string; person: string | null }>;
      assert.deepEqual(
        since.filter((event) => event.person === 'bob').map((event) => event.event_type),
        ['zone.exit', 'zone.entry'],
        'no presence.changed in between or after',
      );
    });

    it('ignores an exit from a zone the person is not in', async () => {
      const exit = await app.api('POST', '/api/events', { type: 'zone.exit', person: 'bob', zone: 'garden' });
      assert.equal(exit.status, 202);
      assert.equal(exit.body.event.detail.ignored, true);
      assert.equal((await app.api('GET', '/api/persons/bob')).body.zone, 'kitchen');
    });

    it('rejects events for unknown or deleted persons and zones with 404', async () => {
      const before = (await app.api('GET', '/api/events?limit=1000')).body.last_seq;
      assert.equal((await app.api('POST', '/api/events', { type: 'zone.entry', person: 'nobody', zone: 'kitchen' })).status, 404);
      assert.equal((await app.api('POST', '/api/events', { type: 'zone.entry', person: 'bob', zone: 'attic' })).status, 404);
      // Both missing: the zone is named, as the move locks the zone before the person.
      const neither = await app.api('POST', '/api/events', { type: 'zone.entry', person: 'nobody', zone: 'attic' });
      assert.equal(neither.status, 404);
      assert.match(neither.body.detail, /^Zone "attic"/);
      assert.match((await app.api('POST', '/api/events', { type: 'zone.exit', person: 'nobody', zone: 'garden' })).body.detail, /^Person "nobody"/);
      await app.api('POST', '/api/persons', { id: 'gone', name: 'Gone' });
      assert.equal((await app.api('DELETE', '/api/persons/gone')).status, 204);
      const entry = await app.api('POST', '/api/events', { type: 'zone.entry', person: 'gone', zone: 'kitchen' });
      assert.equal(entry.status, 404);
      assert.match(entry.body.detail, /gone/);
      const missing = await app.api('POST', '/api/events', { type: 'zone.entry', person: 'bob' });
      assert.equal(missing.status, 400);
      assert.deepEqual(
        missing.body.errors.map((error: { path: string }) => error.path),
        ['/zone'],
      );
      const badType = await app.api('POST', '/api/events', { type: 'zone.teleport', person: 'bob', zone: 'kitchen' });
      assert.equal(badType.status, 400);
      assert.ok(badType.body.errors.some((error: { path: string }) => error.path === '/type'));
      const history = (await app.api('GET', '/api/events?limit=1000')).body;
      const created = history.events.filter((event: { seq: number }) => event.seq > before).map((event: { event_type: string }) => event.event_type);
      assert.deepEqual(created, ['person.created', 'person.deleted'], 'rejected events change nothing');
    });

    it('records fall and anomaly events with their severity', async () => {
      const fall = await app.api('POST', '/api/events', { type: 'fall.detected', person: 'bob', zone: 'kitchen' });
      assert.equal(fall.status, 202);
      assert.equal(fall.body.event.severity, 'critical');
      assert.deepEqual((await app.presence.fallState()).state, 'ON');
      await app.api('POST', '/api/events', { type: 'fall.cleared' });
      assert.deepEqual((await app.presence.fallState()).state, 'OFF');
      const anomaly = await app.api('POST', '/api/events', { type: 'anomaly.detected', zone: 'garden', detail: { motion: 'unexpected' } });
      assert.equal(anomaly.body.event.severity, 'warning');
      assert.deepEqual(anomaly.body.event.detail, { motion: 'unexpected' });
      const extra = await app.api('POST', '/api/events', { type: 'fall.cleared', severity: 'info' });
      assert.equal(extra.status, 400);
      assert.ok(extra.body.errors.some((error: { path: string }) => error.path === '/severity'));
    });

    it('counts online nodes and their mean quality; nodes go offline after NODE_TIMEOUT_MS', async () => {
      assert.deepEqual((await app.api('GET', '/api/system/health')).body, { node_count: 0, quality: null, mode: 'home' });
      assert.equal((await app.api('POST', '/api/nodes/node-1/heartbeat', { quality: 80 })).status, 204);
      assert.equal((await app.api('POST', '/api/nodes/node-2/heartbeat', { quality: 90 })).status, 204);
      assert.deepEqual((await app.api('GET', '/api/system/health')).body, { node_count: 2, quality: 85, mode: 'home' });
      assert.equal((await app.api('POST', '/api/nodes/node-3/heartbeat', { quality: 101 })).status, 400);
      assert.equal((await app.api('POST', '/api/nodes/Bad!/heartbeat', { quality: 1 })).status, 400);
      await eventually(async () => (await app.api('GET', '/api/system/health')).body.node_count === 0, 10_000, 'nodes offline');
    });

    it('announces a node coming online and going offline, once each, with the new count', async () => {
      // The nodes of the test before are announced offline first.
      await eventually(async () => (await app.api('GET', '/api/events?type=node.offline&limit=10')).body.events.length === 2, 10_000, 'earlier nodes offline');
      const after = (await app.api('GET', '/api/events?order=desc&limit=1')).body.last_seq;
      const nodeEvents = async () =>
        (
          (await app.api('GET', `/api/events?after=${after}&type=node.online&type=node.offline&type=system.health&limit=1000`)).body.events as Array<{
            event_type: string;
            detail: Record<string, unknown>;
          }>
        ).map((event) => (event.event_type === 'system.health' ? `health ${event.detail.node_count}` : `${event.event_type} ${event.detail.node}`));
      // Concurrent first heartbeats of one node: exactly one announcement.
      await Promise.all([70, 71, 72, 73, 74].map((quality) => app.api('POST', '/api/nodes/node-a/heartbeat', { quality })));
      await app.api('POST', '/api/nodes/node-b/heartbeat', { quality: 90 });
      await app.api('POST', '/api/nodes/node-b/heartbeat', { quality: 91 });
      const listed = (await app.api('GET', '/api/nodes')).body as Array<{ id: string; quality: number; online: boolean; last_seen: string }>;
      assert.deepEqual(
        listed.filter((node) => node.id.startsWith('node-')).map((node) => [node.id, node.online]),
        [
          ['node-1', false],
          ['node-2', false],
          ['node-a', true],
          ['node-b', true],
        ],
      );
      assert.equal(listed.find((node) => node.id === 'node-b')!.quality, 91);
      assert.deepEqual(await nodeEvents(), ['node.online node-a', 'health 1', 'node.online node-b', 'health 2']);
      // Silent for NODE_TIMEOUT_MS: each goes offline once, and the count follows at once.
      const offline = await eventually(
        async () => {
          const events = await nodeEvents();
          return events.filter((event) => event.startsWith('node.offline')).length === 2 ? events : null;
        },
        10_000,
        'both nodes offline',
      );
      assert.deepEqual(
        offline
          .slice(4)
          .filter((event) => event.startsWith('node.'))
          .sort(),
        ['node.offline node-a', 'node.offline node-b'],
      );
      assert.equal(offline.at(-1), 'health 0');
      const gone = (await app.api('GET', `/api/events?after=${after}&type=node.offline&limit=10`)).body.events;
      assert.deepEqual(gone.find((event: { detail: { node: string } }) => event.detail.node === 'node-b').detail, {
        node: 'node-b',
        quality: 91,
        last_seen: listed.find((node) => node.id === 'node-b')!.last_seen,
      });
      // Past another timeout: nothing more is announced.
      await new Promise((resolve) => setTimeout(resolve, 1600));
      assert.equal((await nodeEvents()).length, offline.length, 'an offline node is announced once');
      // Back: announced again.
      await app.api('POST', '/api/nodes/node-b/heartbeat', { quality: 88 });
      assert.deepEqual((await nodeEvents()).slice(offline.length), ['node.online node-b', 'health 1']);
      await eventually(async () => (await nodeEvents()).at(-1) === 'health 0', 10_000, 'node-b offline again');
    });

    it('stores a heartbeat quality rounded to 0.01 whatever its magnitude: the same value on both databases', async () => {
      // A PostgreSQL `real` holds about 7 digits and nothing below 1.4e-45; SQLite's holds a double.
      const cases: [number, number][] = [
        [1e-46, 0],
        [7e-46, 0],
        [1e-320, 0],
        [5e-324, 0],
        [-0, 0],
        [0.004, 0],
        [0.005, 0.01],
        [12.3456789, 12.35],
        [0.1 + 0.2, 0.3],
        [99.999, 100],
        [100, 100],
      ];
      for (const [index, [quality, stored]] of cases.entries()) {
        const response = await app.api('POST', `/api/nodes/q-${index}/heartbeat`, { quality });
        assert.equal(response.status, 204, `${quality}: ${JSON.stringify(response.body)}`);
        const row = await app.database.db.selectFrom('nodes').select('quality').where('id', '=', `q-${index}`).executeTakeFirstOrThrow();
        assert.ok(Object.is(row.quality, stored), `${quality} stored as ${row.quality}, expected ${stored}`);
      }
    });

    it('switches the system mode and rejects unknown modes', async () => {
      assert.deepEqual((await app.api('PUT', '/api/system/mode', { mode: 'sleep' })).body, { mode: 'sleep' });
      assert.deepEqual((await app.api('GET', '/api/system/mode')).body, { mode: 'sleep' });
      const bad = await app.api('PUT', '/api/system/mode', { mode: 'party' });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.errors[0].path, '/mode');
      const events = (await app.api('GET', '/api/events?limit=1000')).body.events;
      const changed = events.filter((event: { event_type: string }) => event.event_type === 'system.mode_changed');
      assert.equal(changed.length, 1);
      assert.deepEqual(changed[0].detail, { from: 'home', to: 'sleep', source: 'api' });
    });

    it('renames persons and zones with PATCH, refusing unknown ids and fields', async () => {
      const renamed = await app.api('PATCH', '/api/persons/bob', { name: 'Robert' });
      assert.equal(renamed.status, 200);
      assert.equal(renamed.body.name, 'Robert');
      assert.equal((await app.api('PATCH', '/api/zones/garden', { name: 'Back garden' })).body.name, 'Back garden');
      assert.equal((await app.api('PATCH', '/api/persons/nobody', { name: 'X' })).status, 404);
      const bad = await app.api('PATCH', '/api/zones/garden', { id: 'other' });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.errors[0].path, '/id');
      // Only the renames: nodes of earlier tests going offline announce themselves in between.
      const types = (await app.api('GET', '/api/events?order=desc&limit=2&type=zone.updated&type=person.updated')).body.events.map(
        (event: { event_type: string }) => event.event_type,
      );
      assert.deepEqual(types, ['zone.updated', 'person.updated']);
    });

    it('deleting a zone moves its occupants out', async () => {
      await app.api('POST', '/api/zones', { id: 'attic', name: 'Attic' });
      await app.api('POST', '/api/events', { type: 'zone.entry', person: 'bob', zone: 'attic' });
      assert.equal((await app.api('DELETE', '/api/zones/attic')).status, 204);
      assert.equal((await app.api('GET', '/api/persons/bob')).body.zone, null);
      assert.equal((await app.api('GET', '/api/zones/attic')).status, 404);
    });

    it('pages the event history by sequence number', async () => {
      const first = (await app.api('GET', '/api/events?limit=3')).body;
      assert.equal(first.events.length, 3);
      assert.deepEqual(
        first.events.map((event: { seq: number }) => event.seq),
        [1, 2, 3],
      );
      const next = (await app.api('GET', `/api/events?after=${first.last_seq}&limit=2`)).body;
      assert.deepEqual(
        next.events.map((event: { seq: number }) => event.seq),
        [4, 5],
      );
      assert.equal((await app.api('GET', '/api/events?limit=0')).status, 400);
      assert.equal((await app.api('GET', '/api/events?after=abc')).status, 400);
    });
  });
}

describe('the health report timer', () => {
  it('emits system.health every HEALTH_INTERVAL_MS once the app is started', async () => {
    const app = await startTestApp('sqlite', { HEALTH_INTERVAL_MS: '100' }, { start: true });
    try {
      const healthEvents = async () =>
        ((await app.api('GET', '/api/events?limit=1000')).body.events as Array<{ event_type: string }>).filter((event) => event.event_type === 'system.health')
          .length;
      await eventually(async () => (await healthEvents()) >= 3, 5000, 'three health reports');
    } finally {
      await app.cleanup();
    }
  });

  it('reports once per interval for the installation, however many instances share the database', async () => {
    const env = await createTestEnv('postgres', { HEALTH_INTERVAL_MS: '300' });
    const instances = [
      await startTestApp('postgres', {}, { testEnv: env, start: true }),
      await startTestApp('postgres', {}, { testEnv: env, start: true }),
      await startTestApp('postgres', {}, { testEnv: env, start: true }),
    ];
    try {
      const started = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 3000));
      const elapsed = Date.now() - started;
      // Only the window measured: the first instance already reports while the others are starting.
      const events = ((await instances[0]!.api('GET', '/api/events?type=system.health&limit=1000')).body.events as Array<{ timestamp: string }>).filter(
        (event) => Date.parse(event.timestamp) >= started,
      );
      // Three instances each ticking every 300 ms would report 30 times; once per interval is at most elapsed / (0.9 x 300 ms) + 1.
      assert.ok(events.length >= 5, `${events.length} reports in ${elapsed} ms`);
      assert.ok(events.length <= Math.floor(elapsed / 270) + 1, `${events.length} reports in ${elapsed} ms from 3 instances`);
      // Not the gaps between the events' timestamps: each adds its own time from claim to write, which a
      // busy machine stretches. The claims' spacing is db.test.ts's (claimInterval).
      // The instance that reported stops: another takes over within an interval or two.
      await instances[0]!.close();
      const before = events.length;
      await new Promise((resolve) => setTimeout(resolve, 1200));
      const later = (await instances[1]!.api('GET', '/api/events?type=system.health&limit=1000')).body.events as Array<{ timestamp: string }>;
      assert.ok(later.filter((event) => Date.parse(event.timestamp) >= started).length >= before + 2, 'the others keep reporting');
    } finally {
      await instances[1]!.close();
      await instances[2]!.close();
      await env.cleanup();
    }
  });
});

for (const dialect of DIALECTS) {
  describe(`zone occupancy at size (${dialect})`, () => {
    let app: TestApp;
    before(async () => (app = await startTestApp(dialect)));
    after(() => app.cleanup());

    it("counts a move's zones through an index, not by reading every person", async () => {
      // 5,000 persons, 1,000 of them in the hall, as in a building.
      await sql`insert into persons (id, name, presence, zone_id, created_at)
        select 'p' || g, 'Person ' || g, 'home', case when g <= 1000 then 'hall' else 'zone-' || (g % 500) end, '2026-01-01T00:00:00.000Z'
        from ${sql.raw(dialect === 'postgres' ? 'generate_series(1, 5000) g' : '(with recursive s(g) as (select 1 union all select g + 1 from s where g < 5000) select g from s)')}`.execute(
        app.database.db,
      );
      await sql`analyze`.execute(app.database.db);
      const others = async (zone: string) => Number((await othersInZone(app.database.db, zone, 'p1').executeTakeFirstOrThrow()).count);
      assert.deepEqual([await others('hall'), await others('zone-7')], [999, 8]);
      const query = othersInZone(app.database.db, 'hall', 'p1').compile();
      const explain = dialect === 'postgres' ? 'explain ' : 'explain query plan ';
      const { rows } = await app.database.db.executeQuery(CompiledQuery.raw(explain + query.sql, [...query.parameters]));
      const plan = rows.map((row) => Object.values(row as object).join(' ')).join('\n');
      if (dialect === 'postgres') assert.doesNotMatch(plan, /Seq Scan/, plan);
      else assert.doesNotMatch(plan, /SCAN persons(?! USING)/, plan);
      assert.match(plan, /persons_zone/, plan);
    });

    it("gives a move's events the occupancy after it, read with the person's row", async () => {
      for (const id of ['hall', 'zone-1']) assert.equal((await app.api('POST', '/api/zones', { id, name: id })).status, 201);
      const moved = async (body: object) => {
        const { seq } = (await app.api('GET', '/api/events?order=desc&limit=1')).body.events[0] ?? { seq: 0 };
        assert.equal((await app.api('POST', '/api/events', body)).status, 202);
        const events = (await app.api('GET', `/api/events?after=${seq}`)).body.events as { event_type: string; zone: string; detail: { count?: number } }[];
        return events.filter((event) => event.zone !== null).map((event) => `${event.event_type} ${event.zone} ${event.detail.count}`);
      };
      // p1001 is in zone-1 with 7 others; the hall holds 1,000.
      assert.deepEqual(await moved({ type: 'zone.entry', person: 'p1001', zone: 'hall' }), ['zone.exit zone-1 7', 'zone.entry hall 1001']);
      assert.deepEqual(await moved({ type: 'zone.entry', person: 'p1001', zone: 'hall' }), ['zone.entry hall 1001']);
      assert.deepEqual(await moved({ type: 'zone.exit', person: 'p1001', zone: 'zone-1' }), ['zone.exit zone-1 7']);
      assert.deepEqual(await moved({ type: 'zone.exit', person: 'p1001', zone: 'hall' }), ['zone.exit hall 1000']);
      assert.deepEqual(await moved({ type: 'zone.entry', person: 'p2', zone: 'zone-1' }), ['zone.exit hall 999', 'zone.entry zone-1 8']);
    });
  });
}

describe('zone occupancy: a move that waited for its person (postgres)', () => {
  it('counts who entered the zone while it waited', async () => {
    const app = await startTestApp('postgres');
    const holder = new pg.Client({ connectionString: app.config.databaseUrl! });
    try {
      await app.api('POST', '/api/zones', { id: 'kitchen', name: 'Kitchen' });
      for (const id of ['ann', 'bob']) await app.api('POST', '/api/persons', { id, name: id });
      await holder.connect();
      await holder.query('begin');
      await holder.query(`select * from persons where id = 'ann' for update`); // a slow move of Ann's ahead of this one
      const ann = app.api('POST', '/api/events', { type: 'zone.entry', person: 'ann', zone: 'kitchen' });
      await lockWaiter(app, "Ann's move to wait for her row");
      const bob = await app.api('POST', '/api/events', { type: 'zone.entry', person: 'bob', zone: 'kitchen' });
      assert.equal(bob.body.event.detail.count, 1);
      await holder.query('commit');
      assert.equal((await ann).body.event.detail.count, 2, 'Bob entered while Ann waited');
    } finally {
      await holder.end().catch(() => {});
      await app.cleanup();
    }
  });
});
