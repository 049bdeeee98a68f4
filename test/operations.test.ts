import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ADMIN_TOKEN, createTestEnv, DIALECTS, eventually, type DialectName } from './helpers/app.js';
import { freePort } from './helpers/broker.js';
import { admin, post, startService, stopProcess } from './helpers/process.js';
import { startReceiver } from './helpers/receiver.js';
import { connect, migrateTo, PREVIOUS_SCHEMA } from './helpers/previous-release.js';
import { SCHEMA_VERSION } from '../src/db/index.js';

/** The shell blocks of docs/operations.md marked `<!-- ops:NAME -->`, as written there. */
const OPERATIONS = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
function documented(name: string): string {
  const block = new RegExp(`<!-- ops:${name} -->\\n\`\`\`sh\\n([\\s\\S]*?)\`\`\``).exec(OPERATIONS)?.[1];
  assert.ok(block, `docs/operations.md has the block ops:${name}`);
  return block;
}

/** Runs a documented block with sh -e, as an operator would paste it. */
const runDocumented = (name: string, env: Record<string, string>) =>
  execFileSync('sh', ['-e', '-c', documented(name)], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: 'pipe' });

const zones = async (base: string) =>
  ((await (await fetch(`${base}/api/zones`, { headers: admin })).json()) as { name: string }[]).map((zone) => zone.name).sort();

for (const dialect of DIALECTS) {
  describe(`backup and restore as docs/operations.md says (${dialect})`, () => {
    it('restores what the backup held, loses what came after, and sends the pending deliveries again with their webhook-id', async () => {
      const env = await createTestEnv(dialect, { WEBHOOK_RETRY_DELAY_MS: '300', WEBHOOK_TIMEOUT_MS: '1000', LOG_LEVEL: 'warn' });
      const backup = mkdtempSync(path.join(tmpdir(), 'mothership-backup-'));
      // A directory that does not exist yet, as an operator's dated one: the documented block makes it.
      const shellEnv = {
        DATA_DIR: env.dataDir,
        BACKUP: path.join(backup, 'today'),
        ...(env.env.DATABASE_URL ? { DATABASE_URL: env.env.DATABASE_URL } : {}),
      };
      let up = false;
      const receiver = await startReceiver((response) => {
        response.writeHead(up ? 200 : 503);
        response.end();
      });
      const port = await freePort();
      let service = await startService(env.env, port);
      try {
        const base = service.base;
        assert.equal((await post(base, '/api/settings/integration/webhook-secret', {})).status, 200);
        assert.equal((await post(base, '/api/settings/integration', { webhook: { enabled: true, url: receiver.url } })).status, 200);
        assert.equal((await post(base, '/api/zones', { name: 'before the backup' })).status, 201);
        // The receiver is down: the zone's event waits for a retry when the backup is taken.
        const pending = await eventually(() => receiver.received.find((request) => request.body.includes('before the backup')), 5000, 'the first attempt');
        const webhookId = pending.headers['webhook-id'];
        assert.ok(webhookId);
        runDocumented(`${dialect}-backup`, shellEnv);

        up = true;
        assert.equal((await post(base, '/api/zones', { name: 'after the backup' })).status, 201);
        const sent = (id: unknown) => receiver.received.filter((request) => request.headers['webhook-id'] === id).length;
        await eventually(
          () => sent(webhookId) >= 2 && receiver.received.some((request) => request.body.includes('after the backup')),
          10_000,
          'the deliveries',
        );
        await stopProcess(service.child);
        const attempts = sent(webhookId);

        runDocumented(`${dialect}-restore`, shellEnv);
        const afterRestore = receiver.received.length;
        service = await startService(env.env, port);
        assert.deepEqual(await zones(service.base), ['before the backup']);
        await eventually(() => sent(webhookId) > attempts, 10_000, 'the restored delivery sent again');
        const again = receiver.received.slice(afterRestore);
        assert.ok(
          again.every((request) => !request.body.includes('after the backup')),
          'an event written after the backup is gone',
        );
        assert.equal(again.find((request) => request.headers['webhook-id'] === webhookId)!.body, pending.body);
        // The admin token restored with it still signs in.
        assert.equal((await fetch(`${service.base}/api/zones`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status, 200);
      } finally {
        await stopProcess(service.child);
        await receiver.close();
        rmSync(backup, { recursive: true, force: true });
        await env.cleanup();
      }
    });

    it('a rollback restore leaves the previous schema exactly, and upgrading again works', async () => {
      const env = await createTestEnv(dialect, { LOG_LEVEL: 'warn' });
      const backup = mkdtempSync(path.join(tmpdir(), 'mothership-backup-'));
      const shellEnv = { DATA_DIR: env.dataDir, BACKUP: backup, ...(env.env.DATABASE_URL ? { DATABASE_URL: env.env.DATABASE_URL } : {}) };
      const port = await freePort();
      const db = connect(dialect, env);
      await migrateTo(db, dialect, PREVIOUS_SCHEMA);
      await db.destroy();
      let service: Awaited<ReturnType<typeof startService>> | null = null;
      try {
        const schema = (statement: string) => execSql(dialect, env, statement);
        runDocumented(`${dialect}-backup`, shellEnv);
        service = await startService(env.env, port);
        await stopProcess(service.child);
        runDocumented(`${dialect}-restore`, shellEnv);
        assert.equal(schema('select max(name) from kysely_migration'), PREVIOUS_SCHEMA);
        // No record of the release that had migrated it (the previous release's schema has the table).
        assert.equal(schema('select count(*) from schema_releases'), '0');
        service = await startService(env.env, port);
        assert.equal(((await (await fetch(`${service.base}/readyz`)).json()) as { schema: string }).schema, SCHEMA_VERSION);
      } finally {
        if (service) await stopProcess(service.child);
        rmSync(backup, { recursive: true, force: true });
        await env.cleanup();
      }
    });
  });
}

/** One statement through the database's own client (sqlite3 or psql); its single value. */
function execSql(dialect: DialectName, env: { dataDir: string; env: Record<string, string> }, statement: string): string {
  const [command, args] =
    dialect === 'postgres'
      ? ['psql', [env.env.DATABASE_URL!, '-tA', '-v', 'ON_ERROR_STOP=1', '-c', statement]]
      : ['sqlite3', [path.join(env.dataDir, 'mothership.db'), statement]];
  return execFileSync(command, args as string[], { stdio: 'pipe' })
    .toString()
    .trim();
}
