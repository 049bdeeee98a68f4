import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DIALECTS, startTestApp, type TestApp } from './helpers/app.js';
import { NODE_PAGE } from '../src/limits.js';

const LIMIT = 6;

for (const dialect of DIALECTS) {
  describe(`nodes: bounded registration, rename, zone, delete, pages (${dialect})`, () => {
    let app: TestApp;
    let ingest: Record<string, string>;
    let read: Record<string, string>;
    const beat = (id: string, headers = ingest) => app.api('POST', `/api/nodes/${id}/heartbeat`, { quality: 90 }, headers);
    const allNodes = async () => (await app.api('GET', `/api/nodes?limit=${NODE_PAGE.max}`)).body as { id: string }[];

    before(async () => {
      app = await startTestApp(dialect, { NODE_LIMIT: String(LIMIT), NODE_TIMEOUT_MS: '60000' });
      const token = async (scope: string) => ({ authorization: `Bearer ${(await app.api('POST', '/api/tokens', { name: scope, scope })).body.token}` });
      ingest = await token('ingest');
      read = await token('read');
    });
    after(() => app.cleanup());

    it('registers at most NODE_LIMIT nodes, also when new nodes report at the same moment; known nodes keep reporting', async () => {
      const answers = await Promise.all(Array.from({ length: 4 * LIMIT }, (_, i) => beat(`burst-${String(i).padStart(2, '0')}`)));
      assert.equal(answers.filter((answer) => answer.status === 204).length, LIMIT, JSON.stringify(answers.map((answer) => answer.status)));
      const refused = answers.find((answer) => answer.status !== 204)!;
      assert.equal(refused.status, 409);
      assert.equal(refused.headers['content-type'], 'application/problem+json; charset=utf-8');
      assert.equal(refused.body.code, 'node_limit_reached');
      assert.match(refused.body.detail, /NODE_LIMIT/);
      assert.match(refused.body.detail, /DELETE \/api\/nodes\/\{id\}/);
      const nodes = await allNodes();
      assert.equal(nodes.length, LIMIT);
      for (const node of nodes) assert.equal((await beat(node.id)).status, 204, 'a registered node keeps reporting');
      const onlineEvents = (await app.api('GET', '/api/events?type=node.online&limit=1000')).body.events;
      assert.equal(onlineEvents.length, LIMIT, 'a refused registration announces nothing');
    });

    it('deletes a node (admin only), which frees its place and lowers the online count', async () => {
      const [first] = await allNodes();
      assert.equal((await app.api('DELETE', `/api/nodes/${first!.id}`, undefined, read)).status, 403);
      assert.equal((await app.api('DELETE', `/api/nodes/${first!.id}`, undefined, ingest)).status, 403);
      assert.equal((await app.api('GET', '/api/system/health')).body.node_count, LIMIT);
      assert.equal((await app.api('DELETE', `/api/nodes/${first!.id}`)).status, 204);
      const health = (await app.api('GET', '/api/events?order=desc&limit=1')).body.events[0];
      assert.equal(health.event_type, 'system.health');
      assert.equal(health.detail.node_count, LIMIT - 1);
      assert.equal((await app.api('GET', `/api/nodes/${first!.id}`)).status, 404);
      const again = await app.api('DELETE', `/api/nodes/${first!.id}`);
      assert.equal(again.status, 404);
      assert.equal(again.body.code, 'not_found');
      assert.equal((await beat('newcomer')).status, 204, 'the freed place takes a new node');
      assert.equal((await beat('one-too-many')).status, 409);
    });

    it('renames a node and places it in a zone; a deleted zone takes its nodes out', async () => {
      await app.api('POST', '/api/zones', { id: 'hall', name: 'Hall' });
      const renamed = await app.api('PATCH', '/api/nodes/newcomer', { name: 'Hall sensor', zone: 'hall' });
      assert.equal(renamed.status, 200, JSON.stringify(renamed.body));
      assert.deepEqual(
        { id: renamed.body.id, name: renamed.body.name, zone: renamed.body.zone, online: renamed.body.online },
        { id: 'newcomer', name: 'Hall sensor', zone: 'hall', online: true },
      );
      assert.deepEqual((await app.api('GET', '/api/nodes/newcomer')).body, renamed.body);
      assert.equal((await beat('newcomer')).status, 204);
      assert.equal((await app.api('GET', '/api/nodes/newcomer')).body.name, 'Hall sensor', 'a heartbeat keeps the name');

      const unknownZone = await app.api('PATCH', '/api/nodes/newcomer', { zone: 'attic' });
      assert.equal(unknownZone.status, 404);
      assert.match(unknownZone.body.detail, /Zone "attic"/);
      assert.equal((await app.api('PATCH', '/api/nodes/ghost', { name: 'x' })).status, 404);
      for (const [body, path] of [
        [{ name: '' }, '/name'],
        [{ name: 'n'.repeat(201) }, '/name'],
        [{ zone: 'Not An Id' }, '/zone'],
        [{ colour: 'red' }, '/colour'],
      ] as const) {
        const bad = await app.api('PATCH', '/api/nodes/newcomer', body);
        assert.equal(bad.status, 400, JSON.stringify(body));
        assert.ok(
          bad.body.errors.some((error: { path: string }) => error.path.startsWith(path)),
          JSON.stringify(bad.body.errors),
        );
      }
      assert.equal((await app.api('PATCH', '/api/nodes/newcomer', { name: 'x' }, read)).status, 403);

      assert.equal((await app.api('DELETE', '/api/zones/hall')).status, 204);
      assert.equal((await app.api('GET', '/api/nodes/newcomer')).body.zone, null);
      await app.api('POST', '/api/zones', { id: 'den', name: 'Den' });
      await app.api('PATCH', '/api/nodes/newcomer', { zone: 'den' });
      assert.equal((await app.api('PATCH', '/api/nodes/newcomer', { zone: null })).body.zone, null);
    });

    it('pages the node list by cursor, with a Link to the next page; the default page is NODE_PAGE.default', async () => {
      const everything = await allNodes();
      assert.equal(everything.length, LIMIT);
      const seen: string[] = [];
      let url: string | null = '/api/nodes?limit=4';
      let pages = 0;
      while (url) {
        const page: { status: number; body: { id: string }[]; headers: Record<string, unknown> } = await app.api('GET', url, undefined, read);
        assert.equal(page.status, 200);
        assert.ok(page.body.length <= 4);
        seen.push(...page.body.map((node) => node.id));
        const link = page.headers.link as string | undefined;
        url = link ? /^<([^>]+)>; rel="next"$/.exec(link)![1]! : null;
        pages++;
      }
      assert.equal(pages, 2);
      assert.deepEqual(
        seen,
        everything.map((node) => node.id),
      );
      const unpaged = await app.api('GET', '/api/nodes');
      assert.equal(unpaged.body.length, LIMIT, `up to ${NODE_PAGE.default} nodes without ?limit=`);
      assert.equal(unpaged.headers.link, undefined);
      for (const query of ['limit=0', `limit=${NODE_PAGE.max + 1}`, 'limit=x', 'cursor=Bad%20Id']) {
        const bad = await app.api('GET', `/api/nodes?${query}`);
        assert.equal(bad.status, 400, query);
        assert.equal(bad.body.code, 'validation_failed', query);
      }
    });
  });
}
