import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DIALECTS, startTestApp, type TestApp } from './helpers/app.js';

const PERSONS = 5;
const ZONES = 3;

for (const dialect of DIALECTS) {
  describe(`people and zones: at most PERSON_LIMIT and ZONE_LIMIT (${dialect})`, () => {
    let app: TestApp;
    let household: Record<string, string>;

    before(async () => {
      app = await startTestApp(dialect, { PERSON_LIMIT: String(PERSONS), ZONE_LIMIT: String(ZONES) });
      const password = 'household-password';
      assert.equal((await app.api('POST', '/api/users', { username: 'kim', role: 'household', password })).status, 201);
      const signedIn = await app.api('POST', '/api/session', { username: 'kim', password }, { authorization: '' });
      household = { authorization: '', cookie: String(signedIn.headers['set-cookie']).split(';')[0]!, 'sec-fetch-site': 'same-origin' };
    });
    after(() => app.cleanup());

    for (const [collection, limit, code, setting] of [
      ['persons', PERSONS, 'person_limit_reached', 'PERSON_LIMIT'],
      ['zones', ZONES, 'zone_limit_reached', 'ZONE_LIMIT'],
    ] as const) {
      it(`creates at most ${setting} ${collection}, also when creates come at the same moment; a deletion frees a place`, async () => {
        const answers = await Promise.all(
          Array.from({ length: 4 * limit }, (_, i) => app.api('POST', `/api/${collection}`, { name: `Burst ${i}` }, household)),
        );
        assert.equal(answers.filter((answer) => answer.status === 201).length, limit, JSON.stringify(answers.map((answer) => answer.status)));
        const refused = answers.find((answer) => answer.status !== 201)!;
        assert.equal(refused.status, 409);
        assert.equal(refused.headers['content-type'], 'application/problem+json; charset=utf-8');
        assert.equal(refused.body.code, code);
        assert.equal(refused.body.type, `/problems/${code}`);
        assert.match(refused.body.detail, new RegExp(`has ${limit} .*${setting}`));
        assert.match(refused.body.detail, new RegExp(`DELETE /api/${collection}/\\{id\\}`));
        const stored = (await app.api('GET', `/api/${collection}?limit=500`)).body as { id: string }[];
        assert.equal(stored.length, limit);
        const created = (await app.api('GET', `/api/events?type=${collection === 'persons' ? 'person' : 'zone'}.created&limit=1000`)).body.events;
        assert.equal(created.length, limit, 'a refused create announces nothing');
        assert.equal((await app.api('POST', `/api/${collection}`, { id: 'chosen', name: 'Chosen' })).body.code, code, 'an admin with a chosen id too');
        // An id already taken is still that conflict at the limit: a client reads it as "already there".
        const again = await app.api('POST', `/api/${collection}`, { id: stored[0]!.id, name: 'Again' });
        assert.equal(again.status, 409);
        assert.equal(again.body.code, 'conflict');
        assert.equal((await app.api('DELETE', `/api/${collection}/${stored[0]!.id}`, undefined, household)).status, 204);
        assert.equal((await app.api('POST', `/api/${collection}`, { name: 'Newcomer' }, household)).status, 201, 'the freed place takes a new one');
      });
    }

    it('lists the refusals in the OpenAPI document', async () => {
      const spec = (await app.api('GET', '/openapi.json')).body;
      for (const [path, code] of [
        ['/api/persons', 'person_limit_reached'],
        ['/api/zones', 'zone_limit_reached'],
      ])
        assert.ok(JSON.stringify(spec.paths[path].post.responses['409']).includes(code), `${path}: ${JSON.stringify(spec.paths[path].post.responses['409'])}`);
    });
  });
}
