import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { sql } from 'kysely';
import { ADMIN_TOKEN, createTestEnv, eventually, startTestApp } from '../helpers/app.js';
import { freePort } from '../helpers/broker.js';
import { allEvents, post, spawnMothership, START_TIMEOUT_MS, startService, stopProcess } from '../helpers/process.js';
import { startReceiver } from '../helpers/receiver.js';

/** A real full disk: DATA_DIR on a tmpfs of its own (root may mount one; the test runs as root here and in CI). */
function mountSmallDisk(megabytes: number) {
  const dir = mkdtempSync(path.join(tmpdir(), 'mothership-disk-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${megabytes}m,mode=0700`, 'tmpfs', dir]);
  return {
    dir,
    freeBytes: () => {
      const stats = statfsSync(dir);
      return stats.bavail * stats.bsize;
    },
    remove() {
      execFileSync('umount', ['-l', dir]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

type Line = { level: number; msg: string; code?: string; reason?: string };
const logLines = (output: string): Line[] =>
  output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Line);

describe('a full disk on SQLite (DATA_DIR on a 16 MB tmpfs)', () => {
  it('answers writes 503 problem+json with Retry-After, /readyz says "disk full", logs a line per reason, and recovers without a restart', async () => {
    const disk = mountSmallDisk(16);
    // Background tasks that write every second or so (the worker, the webhook dispatcher, the health
    // report) must not flood the log either.
    const env = await createTestEnv('sqlite', { DATA_DIR: disk.dir, LOG_LEVEL: 'info', LOG_FORMAT: 'json', WORKER: 'embedded', HEALTH_INTERVAL_MS: '1000' });
    const receiver = await startReceiver();
    const port = await freePort();
    const service = await startService(env.env, port);
    const ballast = path.join(disk.dir, 'ballast');
    let running = true;
    let senders: Promise<void>[] = [];
    try {
      assert.equal((await post(service.base, '/api/settings/integration', { webhook: { enabled: true, url: receiver.url } })).status, 200);
      // Leave about 3 MB: the write load fills that within seconds.
      writeFileSync(ballast, Buffer.alloc(Math.max(0, disk.freeBytes() - 3 * 1024 * 1024)));
      const pad = 'x'.repeat(2000);
      const acknowledged = new Set<number>();
      const statuses = new Map<number, number>();
      let refusal: Response | null = null;
      let refusalBody: Record<string, unknown> | null = null;
      let next = 0;
      const sender = async () => {
        while (running) {
          const n = next++;
          const response = await post(service.base, '/api/events', { type: 'anomaly.detected', detail: { n, pad } }).catch(() => null);
          if (!response) {
            statuses.set(0, (statuses.get(0) ?? 0) + 1);
            if (service.child.exitCode !== null || service.child.signalCode !== null) running = false;
            continue;
          }
          statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
          if (response.status === 202) acknowledged.add(n);
          const body = (await response.json()) as Record<string, unknown>;
          if (response.status !== 202 && !refusal) [refusal, refusalBody] = [response, body];
        }
      };
      senders = Array.from({ length: 8 }, sender);
      const outputBefore = service.child.output().length;
      await eventually(
        () =>
          refusal ??
          (!running && assert.fail(`the service stopped: ${service.child.signalCode ?? service.child.exitCode}\n${service.child.output().slice(-3000)}`)),
        60_000,
        'a refused write once the disk is full',
      );
      // Keep writing into the full disk for a while: the log must stay bounded meanwhile.
      const refusedAt = statuses.get(refusal!.status) ?? 0;
      await eventually(() => (statuses.get(refusal!.status) ?? 0) >= refusedAt + 300, 30_000, '300 more refused writes');

      assert.equal(refusal!.status, 503, JSON.stringify(refusalBody));
      assert.equal(refusalBody!.code, 'service_unavailable');
      assert.match(refusal!.headers.get('content-type') ?? '', /^application\/problem\+json/);
      assert.match(refusal!.headers.get('retry-after') ?? '', /^[1-9][0-9]*$/);
      assert.match(String(refusalBody!.detail), /disk/i);

      const ready = await fetch(`${service.base}/readyz`);
      const readiness = (await ready.json()) as { status: string; checks: Record<string, string> };
      assert.equal(ready.status, 503, JSON.stringify(readiness));
      assert.equal(readiness.status, 'not_ready');
      assert.equal(readiness.checks.disk, 'disk full');

      const lines = logLines(service.child.output().slice(outputBefore)).filter((line) => line.level >= 40);
      assert.ok(lines.length <= 6, `at most a line per reason while the disk is full, got ${lines.length}:\n${lines.map((line) => line.msg).join('\n')}`);
      assert.ok(!lines.some((line) => line.msg === 'request failed'));

      // The operator frees space: the service takes writes again, without a restart.
      rmSync(ballast);
      await eventually(
        async () => (await post(service.base, '/api/events', { type: 'anomaly.detected', detail: { n: -1 } })).status === 202,
        20_000,
        'a write accepted after space was freed',
      );
      running = false;
      await Promise.all(senders);
      await eventually(async () => (await fetch(`${service.base}/readyz`)).status === 200, 10_000, 'ready again');
      assert.deepEqual(
        [...statuses.keys()].filter((status) => status !== 202 && status !== 503),
        [],
        JSON.stringify([...statuses]),
      );

      const logged = new Set((await allEvents(service.base, 'anomaly.detected')).map((event) => event.detail.n as number));
      const lost = [...acknowledged].filter((n) => !logged.has(n));
      assert.deepEqual(lost, [], 'every acknowledged event is in the log');
      await stopProcess(service.child);
      const file = new BetterSqlite3(path.join(disk.dir, 'mothership.db'));
      try {
        assert.equal(file.pragma('integrity_check', { simple: true }), 'ok');
      } finally {
        file.close();
      }
    } finally {
      running = false;
      await Promise.all(senders);
      await stopProcess(service.child);
      await receiver.close();
      await env.cleanup();
      disk.remove();
    }
  });
});

describe('a start on a full disk (SQLite)', () => {
  it('says so in one sentence, without a stack, and exits 1 so that a supervisor starts it again once space is freed (outside test)', async () => {
    const disk = mountSmallDisk(4);
    const env = await createTestEnv('sqlite', { DATA_DIR: disk.dir });
    try {
      const first = await startService(env.env, await freePort());
      await stopProcess(first.child);
      writeFileSync(path.join(disk.dir, 'ballast'), Buffer.alloc(disk.freeBytes()));
      const child = spawnMothership(['serve'], { ...env.env, PORT: String(await freePort()) });
      const code = await Promise.race([
        new Promise((resolve) => child.once('exit', resolve)),
        new Promise((resolve) => setTimeout(() => resolve('still running'), START_TIMEOUT_MS)),
      ]);
      child.kill('SIGKILL');
      assert.equal(code, 1, child.output());
      assert.match(child.output(), new RegExp(`^Cannot write the SQLite database in ${disk.dir} \\(DATA_DIR\\): the disk is full`, 'm'));
      assert.doesNotMatch(child.output(), /\n\s+at /, 'no stack trace');
    } finally {
      await env.cleanup();
      disk.remove();
    }
  });
});

describe('a full disk on PostgreSQL (SQLSTATE 53100)', () => {
  it('answers writes 503 with Retry-After and /readyz "disk full" until a write succeeds again', async () => {
    const app = await startTestApp('postgres');
    try {
      // The server raises disk_full as it does when it cannot extend a file; only the cause is staged.
      await app.database.db.schema.createTable('disk_full_switch').addColumn('on', 'boolean').execute();
      await sqlRun(
        app,
        `create function disk_full_check() returns trigger language plpgsql as $$ begin
           if exists (select 1 from disk_full_switch) then raise exception 'could not extend file: No space left on device' using errcode = 'disk_full'; end if;
           return new; end $$`,
      );
      await sqlRun(app, `create trigger disk_full before insert on events for each row execute function disk_full_check()`);
      assert.equal((await app.api('POST', '/api/events', { type: 'anomaly.detected' })).status, 202);
      await sqlRun(app, `insert into disk_full_switch values (true)`);

      const refused = await app.api('POST', '/api/events', { type: 'anomaly.detected' });
      assert.equal(refused.status, 503, JSON.stringify(refused.body));
      assert.equal(refused.body.code, 'service_unavailable');
      assert.match(String(refused.headers['content-type']), /^application\/problem\+json/);
      assert.match(String(refused.headers['retry-after']), /^[1-9][0-9]*$/);
      const ready = await app.api('GET', '/readyz', undefined, { authorization: '' });
      assert.equal(ready.status, 503);
      assert.equal(ready.body.checks.disk, 'disk full');

      await sqlRun(app, `delete from disk_full_switch`);
      assert.equal((await app.api('POST', '/api/events', { type: 'anomaly.detected' })).status, 202);
      const again = await app.api('GET', '/readyz', undefined, { authorization: '' });
      assert.equal(again.status, 200, JSON.stringify(again.body));
      assert.equal(again.body.checks.disk, 'ok');
    } finally {
      await app.cleanup();
    }
  });
});

describe('a full disk on PostgreSQL: reads with a token or a session', () => {
  it('keep working: a last-use time that cannot be written is skipped, not answered 503', async () => {
    const app = await startTestApp('postgres');
    try {
      const token = (await app.api('POST', '/api/tokens', { name: 'Wall display', scope: 'read' })).body.token as string;
      const signIn = await app.api('POST', '/api/session', { token: ADMIN_TOKEN }, { authorization: '' });
      const cookie = String(signIn.headers['set-cookie']).split(';')[0]!;
      // The session's idle clock is due for its refresh (once a minute); the token was never used.
      await sqlRun(app, `update admin_sessions set last_seen_at = '${new Date(Date.now() - 5 * 60_000).toISOString()}'`);
      await sqlRun(
        app,
        `create function disk_full_always() returns trigger language plpgsql as $$ begin
           raise exception 'could not extend file: No space left on device' using errcode = 'disk_full'; end $$`,
      );
      for (const table of ['api_tokens', 'admin_sessions'])
        await sqlRun(app, `create trigger disk_full before update on ${table} for each row execute function disk_full_always()`);
      for (let read = 0; read < 3; read++) {
        const byToken = await app.api('GET', '/api/persons', undefined, { authorization: `Bearer ${token}` });
        assert.equal(byToken.status, 200, `read ${read} with the token: ${JSON.stringify(byToken.body)}`);
        const bySession = await app.api('GET', '/api/persons', undefined, { authorization: '', cookie });
        assert.equal(bySession.status, 200, `read ${read} with the session: ${JSON.stringify(bySession.body)}`);
      }
    } finally {
      await app.cleanup();
    }
  });
});

async function sqlRun(app: Awaited<ReturnType<typeof startTestApp>>, text: string): Promise<void> {
  await sql.raw(text).execute(app.database.db);
}
