import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DIALECTS, startTestApp, type TestApp } from './helpers/app.js';
import { createHttpServer } from '../src/http/server.js';

/**
 * Requests sent at the same time (real concurrency: on PostgreSQL each takes its own pooled
 * connection). Whatever the interleaving, the answer is a 2xx or a 4xx naming what was in the way,
 * never a 5xx, and both databases answer alike.
 */
const parallel = <T>(count: number, send: (index: number) => Promise<T>) => Promise.all(Array.from({ length: count }, (_, index) => send(index)));

for (const dialect of DIALECTS) {
  describe(`concurrent writes (${dialect})`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect);
      // Open the pool's connections first: the first parallel requests would otherwise queue for them.
      await parallel(10, () => app.api('GET', '/api/persons'));
    });
    after(() => app.cleanup());
    const statuses = (responses: { status: number }[]) => responses.map((response) => response.status).sort();

    const creates: [string, Record<string, unknown>][] = [
      ['/api/persons', { name: 'X' }],
      ['/api/zones', { name: 'X' }],
      ['/api/bots', { name: 'X' }],
      ['/api/matches', { status: 'scheduled' }],
    ];
    for (const [path, body] of creates) {
      it(`${path}: one id asked for by 8 at once is created once, the rest get 409 conflict`, async () => {
        const responses = await parallel(8, () => app.api('POST', path, { ...body, id: 'same-id-x' }));
        assert.deepEqual(statuses(responses), [201, 409, 409, 409, 409, 409, 409, 409], JSON.stringify(responses.map((response) => response.body)));
        for (const response of responses.filter((candidate) => candidate.status === 409)) {
          assert.equal(response.body.code, 'conflict');
          assert.match(response.body.detail, /"same-id-x" already exists/);
        }
      });
    }

    for (const path of ['/api/persons', '/api/zones']) {
      it(`${path}: of 12 creates at once of one new name, one is stored and the others get 409 naming /name`, async () => {
        const responses = await parallel(12, () => app.api('POST', path, { name: 'Ann Race' }));
        assert.deepEqual(statuses(responses), [201, ...Array(11).fill(409)], JSON.stringify(responses.map((response) => response.body)));
        for (const response of responses.filter((candidate) => candidate.status === 409)) assert.equal(response.body.errors[0].path, '/name');
      });
    }

    for (const path of ['/api/persons', '/api/zones', '/api/bots']) {
      it(`${path}: 12 creates at once deriving their id from one confirmed name all succeed, each with its own suffix`, async () => {
        const confirmed = path === '/api/bots' ? {} : { duplicate_name: true };
        const responses = await parallel(12, () => app.api('POST', path, { name: 'Bob Race', ...confirmed }));
        assert.deepEqual(statuses(responses), Array(12).fill(201), JSON.stringify(responses.map((response) => response.body)));
        const ids = responses.map((response) => response.body.id).sort();
        assert.deepEqual(ids, ['bob-race', ...Array.from({ length: 11 }, (_, index) => `bob-race-${index + 2}`)].sort());
      });
    }

    it("a unique key taken under a write that does not check answers 409 conflict, not 500 (the error handler's backstop)", async () => {
      const http = await createHttpServer({ logLevel: 'silent', trustProxy: false, version: 'test' });
      http.post('/twice', async () => {
        for (let attempt = 0; attempt < 2; attempt++)
          await app.database.db.insertInto('zones').values({ id: 'twice', name: 'Twice', created_at: new Date().toISOString() }).execute();
      });
      try {
        const response = await http.inject({ method: 'POST', url: '/twice' });
        assert.equal(response.statusCode, 409, response.body);
        assert.equal(response.json().code, 'conflict');
        assert.doesNotMatch(response.body, /zones_pkey|UNIQUE constraint|duplicate key/, 'no database internals in the answer');
      } finally {
        await http.close();
      }
    });

    for (const path of ['/api/persons', '/api/zones']) {
      it(`${path}: one record deleted by 4 at once is deleted once, the rest get 404`, async () => {
        assert.equal((await app.api('POST', path, { id: 'doomed', name: 'Doomed' })).status, 201);
        const responses = await parallel(4, () => app.api('DELETE', `${path}/doomed`));
        assert.deepEqual(statuses(responses), [204, 404, 404, 404], JSON.stringify(responses.map((response) => response.body)));
        const kind = path === '/api/persons' ? 'person' : 'zone';
        const deleted = (await app.api('GET', `/api/events?type=${kind}.deleted&limit=1000`)).body.events.filter(
          (event: Record<string, unknown>) => event[kind] === 'doomed',
        );
        assert.equal(deleted.length, 1, 'one deletion event');
      });
    }

    /** A fresh person and zone; `inZone` puts the person in it first. */
    async function personAndZone(tag: string, inZone = false) {
      const person = `p-${tag}`;
      const zone = `z-${tag}`;
      assert.equal((await app.api('POST', '/api/persons', { id: person, name: 'P' })).status, 201);
      assert.equal((await app.api('POST', '/api/zones', { id: zone, name: 'Z' })).status, 201);
      if (inZone) assert.equal((await app.api('POST', '/api/events', { type: 'zone.entry', person, zone })).status, 202);
      return { person, zone };
    }

    it('an entry racing the deletion of its zone never leaves the person in a zone that no longer exists', async () => {
      for (let round = 0; round < 8; round++) {
        const { person, zone } = await personAndZone(`zd${round}`);
        const [entry, removal] = await Promise.all([
          app.api('POST', '/api/events', { type: 'zone.entry', person, zone }),
          app.api('DELETE', `/api/zones/${zone}`),
        ]);
        assert.equal(removal.status, 204, JSON.stringify(removal.body));
        assert.ok([202, 404].includes(entry.status), `round ${round}: ${entry.status} ${JSON.stringify(entry.body)}`);
        if (entry.status === 404) assert.equal(entry.body.detail, `Zone "${zone}" does not exist`);
        const after = (await app.api('GET', `/api/persons/${person}`)).body;
        assert.equal(after.zone, null, `round ${round}: the entry answered ${entry.status} and left ${person} in the deleted zone`);
        // Answered 202: the entry happened before the deletion, which then moved the person out;
        // 404: the person was never seen anywhere.
        assert.equal(after.presence, entry.status === 202 ? 'home' : 'unknown');
      }
    });

    for (const type of ['zone.entry', 'zone.exit'] as const) {
      it(`a ${type} racing the deletion of its person answers 202 or 404 naming the person, never a 5xx`, async () => {
        for (let round = 0; round < 8; round++) {
          const { person, zone } = await personAndZone(`${type.slice(5)}pd${round}`, type === 'zone.exit');
          const [event, removal] = await Promise.all([app.api('POST', '/api/events', { type, person, zone }), app.api('DELETE', `/api/persons/${person}`)]);
          assert.equal(removal.status, 204, JSON.stringify(removal.body));
          assert.ok([202, 404].includes(event.status), `round ${round}: ${event.status} ${JSON.stringify(event.body)}`);
          if (event.status === 404) assert.equal(event.body.detail, `Person "${person}" does not exist`);
          assert.deepEqual((await app.api('GET', `/api/zones/${zone}`)).body.occupants, []);
        }
      });
    }

    it('deleting a zone while one of its occupants is deleted answers 204 to both', async () => {
      for (let round = 0; round < 8; round++) {
        const { person, zone } = await personAndZone(`both${round}`, true);
        const responses = await Promise.all([app.api('DELETE', `/api/zones/${zone}`), app.api('DELETE', `/api/persons/${person}`)]);
        assert.deepEqual(statuses(responses), [204, 204], JSON.stringify(responses.map((response) => response.body)));
      }
    });
  });
}
