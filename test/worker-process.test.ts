import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import pg from 'pg';
import type { AddressInfo } from 'node:net';
import { DIALECTS, eventually, startTestApp, createTestEnv, type TestApp, type TestEnv } from './helpers/app.js';
import { botRequest } from './helpers/bot.js';
import { MAIN, spawnMothership, stopProcess } from './helpers/process.js';
import { REPLAY } from './helpers/fixtures.js';
import { startReceiver } from './helpers/receiver.js';

for (const dialect of DIALECTS) {
  describe(`standalone worker killed mid-job (${dialect})`, () => {
    let env: TestEnv;
    let app: TestApp;
    let llm: Server;
    let calls = 0;
    let llmUrl = '';

    before(async () => {
      // A fake LLM endpoint: the first call never answers (the worker dies holding the job), later calls do.
      llm = createServer((request, response) => {
        calls++;
        request.resume();
        if (calls === 1) return;
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ choices: [{ message: { content: 'Commentary from the second worker.' } }] }));
      });
      await new Promise<void>((resolve) => llm.listen(0, '127.0.0.1', resolve));
      llmUrl = `http://127.0.0.1:${(llm.address() as AddressInfo).port}/v1`;
      env = await createTestEnv(dialect, { ENRICHMENT_LEASE_MS: '1000' });
      app = await startTestApp(dialect, {}, { testEnv: env });
    });
    after(async () => {
      await app.cleanup();
      llm.closeAllConnections();
      llm.close();
      await env.cleanup();
    });

    it('runs the job again after the lease, exactly once to completion', async () => {
      const bot = (await app.api('POST', '/api/bots', { id: 'b', name: 'B' })).body;
      await app.api('POST', '/api/matches', { id: 'm', status: 'completed', replay: REPLAY });
      assert.equal((await botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id: 'm' })).status, 202);

      const workerEnv = { ...env.env, ENRICHMENT_LEASE_MS: '1000', ENRICHMENT_LLM_URL: llmUrl, LOG_LEVEL: 'info' };
      const first = spawnMothership(['worker'], workerEnv);
      await eventually(() => calls === 1, 10_000, 'first worker to call the LLM');
      const running = await app.database.db.selectFrom('enrichment_jobs').selectAll().executeTakeFirstOrThrow();
      assert.equal(running.state, 'running');
      await stopProcess(first, 'SIGKILL');

      const second = spawnMothership(['worker'], workerEnv);
      try {
        const status = await eventually(
          async () => {
            const body = (await app.api('GET', '/api/matches/m/enrichment')).body;
            return body.status === 'completed' ? body : null;
          },
          15_000,
          'the second worker to finish the job',
        );
        assert.equal(status.commentary, 'Commentary from the second worker.');
        const job = await app.database.db.selectFrom('enrichment_jobs').selectAll().executeTakeFirstOrThrow();
        assert.equal(job.attempts, 2);
        assert.equal(calls, 2);
        const completed = (await app.api('GET', '/api/events')).body.events.filter(
          (event: { event_type: string }) => event.event_type === 'enrichment.completed',
        );
        assert.equal(completed.length, 1);
      } finally {
        await stopProcess(second);
      }
      assert.equal(second.exitCode, 0, second.output());
    });
  });
}

for (const dialect of DIALECTS) {
  describe(`a standalone worker's events reach the webhook (${dialect})`, () => {
    it('the receiver gets enrichment.requested from the server and enrichment.completed from the worker, once each', async () => {
      const env = await createTestEnv(dialect);
      const receiver = await startReceiver();
      const app = await startTestApp(dialect, {}, { testEnv: env, start: true });
      const worker = spawnMothership(['worker'], { ...env.env, LOG_LEVEL: 'info' });
      try {
        await app.api('POST', '/api/settings/integration', {
          webhook: { enabled: true, url: receiver.url, secret: 'whsec_' + Buffer.alloc(32, 7).toString('base64') },
        });
        const bot = (await app.api('POST', '/api/bots', { id: 'b', name: 'B' })).body;
        await app.api('POST', '/api/matches', { id: 'm', status: 'completed', replay: REPLAY });
        assert.equal((await botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id: 'm' })).status, 202);
        const types = () => receiver.received.map((delivery) => (JSON.parse(delivery.body) as { event_type: string }).event_type);
        await eventually(() => types().includes('enrichment.completed'), 15_000, "the worker's enrichment.completed at the receiver");
        assert.equal(types().filter((type) => type === 'enrichment.requested').length, 1);
        assert.equal(types().filter((type) => type === 'enrichment.completed').length, 1);
      } finally {
        await stopProcess(worker);
        await app.cleanup();
        await receiver.close();
        await env.cleanup();
      }
    });
  });
}

describe('a standalone worker whose PostgreSQL connections the server ends (postgres)', () => {
  it('keeps running and takes the next job: it does not exit 0 with nothing left to wait on (outside review)', async () => {
    const env = await createTestEnv('postgres');
    const app = await startTestApp('postgres', {}, { testEnv: env });
    const worker = spawnMothership(['worker'], { ...env.env, LOG_LEVEL: 'info' });
    const admin = new pg.Client({ connectionString: env.env.DATABASE_URL });
    try {
      const bot = (await app.api('POST', '/api/bots', { id: 'b', name: 'B' })).body;
      await app.api('POST', '/api/matches', { id: 'm', status: 'completed', replay: REPLAY });
      await eventually(() => worker.output().includes('enrichment worker of Mothership'), 30_000, 'the worker to start');
      await admin.connect();
      // A server restart or a pooler ends the worker's idle connection; the app's are ended too and come back
      // (a request that met one answered 503 and stored nothing: asked again).
      await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()');
      await eventually(
        async () => (await botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id: 'm' })).status === 202,
        10_000,
        'the request to be accepted',
      );
      await eventually(
        async () => {
          assert.equal(worker.exitCode, null, `the worker exited: ${worker.output()}`);
          return (await app.api('GET', '/api/matches/m/enrichment')).body.status === 'completed';
        },
        15_000,
        'the worker to complete the job',
      );
    } finally {
      await admin.end();
      await stopProcess(worker);
      await app.cleanup();
      await env.cleanup();
    }
  });
});

describe('mothership bots create', () => {
  it('prints the new bot id and its shared secret once, and the secret signs requests', async () => {
    const env = await createTestEnv('sqlite');
    // The server's database exists: the command adds to it (it never creates one).
    const app = await startTestApp('sqlite', {}, { testEnv: env });
    try {
      const { execFile } = await import('node:child_process');
      const { promisify } = await import('node:util');
      const { stdout } = await promisify(execFile)(process.execPath, [MAIN, 'bots', 'create', 'Chess Bot'], {
        env: { ...process.env, ...env.env },
      });
      const id = /^id: (.+)$/m.exec(stdout)?.[1];
      const secret = /^shared_secret: (mss_\S+)$/m.exec(stdout)?.[1];
      assert.equal(id, 'chess-bot');
      assert.ok(secret);
      await app.api('POST', '/api/matches', { id: 'g1', status: 'completed', replay: REPLAY });
      assert.equal((await botRequest(app.http, { id: id!, shared_secret: secret! }, 'POST', '/api/request-enrichment', { match_id: 'g1' })).status, 202);
    } finally {
      await app.cleanup();
      await env.cleanup();
    }
  });
});
