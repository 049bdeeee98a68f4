import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { REPLAY } from './helpers/fixtures.js';
import { botRequest } from './helpers/bot.js';
import { ADMIN_TOKEN, startTestApp, type TestApp } from './helpers/app.js';
import { MAIN } from './helpers/process.js';

/** Runs `mothership bots ...` as a real process, in a directory of its own, with only the given environment. */
function bots(args: string[], env: Record<string, string>, cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [MAIN, 'bots', ...args], { cwd, env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'silent', ...env } }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code) : 0, stdout, stderr }),
    );
  });
}

describe('mothership bots: the server it administers, or an existing local database, never a new one', () => {
  let app: TestApp;
  let server: string;
  let elsewhere: string;
  before(async () => {
    app = await startTestApp('sqlite');
    server = await app.http.listen({ port: 0, host: '127.0.0.1' });
    await app.api('POST', '/api/matches', { id: 'g1', status: 'completed', replay: REPLAY });
    // Another directory, as a user in another shell would be: no data dir there.
    elsewhere = mkdtempSync(path.join(tmpdir(), 'ms-elsewhere-'));
  });
  after(async () => {
    await app.cleanup();
    rmSync(elsewhere, { recursive: true, force: true });
  });

  it('run elsewhere without --server: exit 2, says which DATA_DIR and database it looked for, creates nothing', async () => {
    const result = await bots(['create', 'Chess Bot'], {}, elsewhere);
    assert.equal(result.code, 2, result.stderr);
    assert.equal(result.stdout, '');
    assert.match(
      result.stderr,
      new RegExp(`No Mothership database at ${path.join(elsewhere, 'data', 'mothership.db')} \\(DATA_DIR=${path.join(elsewhere, 'data')}\\)`),
    );
    assert.match(result.stderr, /--server URL/);
    assert.equal(existsSync(path.join(elsewhere, 'data')), false, 'no data dir was created');
  });

  it('with --server and MOTHERSHIP_TOKEN: creates, lists, rotates and deletes through the running server, whose secret signs', async () => {
    const env = { MOTHERSHIP_TOKEN: ADMIN_TOKEN };
    const created = await bots(['create', 'Chess', 'Bot', '--server', server], env, elsewhere);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stderr, new RegExp(`Using the server ${server}`));
    const id = /^id: (.+)$/m.exec(created.stdout)![1]!;
    const secret = /^shared_secret: (mss_\S+)$/m.exec(created.stdout)![1]!;
    assert.equal(id, 'chess-bot');
    // The command to rotate it, as typed: it reaches the same server.
    assert.match(created.stdout, new RegExp(`rotate it with: mothership bots rotate chess-bot --server ${server}\\)`));
    assert.equal((await botRequest(app.http, { id, shared_secret: secret }, 'POST', '/api/request-enrichment', { match_id: 'g1' })).status, 202);
    // MOTHERSHIP_SERVER does what --server does.
    const listed = await bots(['list'], { ...env, MOTHERSHIP_SERVER: server }, elsewhere);
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, /^chess-bot\tChess Bot\tcreated /m);
    const rotated = await bots(['rotate', id, '--server', server], env, elsewhere);
    assert.equal(rotated.code, 0, rotated.stderr);
    assert.notEqual(/^shared_secret: (mss_\S+)$/m.exec(rotated.stdout)![1], secret);
    assert.equal((await bots(['delete', id, '--server', server], env, elsewhere)).code, 0);
    assert.equal((await app.api('GET', '/api/bots')).body.length, 0);
    assert.equal(existsSync(path.join(elsewhere, 'data')), false);
  });

  it('a wrong or missing token, an unknown bot, an unreachable server: exit 2 with the reason', async () => {
    const cases: [string[], Record<string, string>, RegExp][] = [
      [['list', '--server', server], {}, /MOTHERSHIP_TOKEN is not set/],
      [['list', '--server', server], { MOTHERSHIP_TOKEN: 'wrong' }, /refused the request \(401\)/],
      [['delete', 'nobody', '--server', server], { MOTHERSHIP_TOKEN: ADMIN_TOKEN }, /refused the request \(404\): Bot "nobody" does not exist/],
      [['list', '--server', 'http://127.0.0.1:9'], { MOTHERSHIP_TOKEN: ADMIN_TOKEN }, /could not reach http:\/\/127\.0\.0\.1:9/],
      [['create'], {}, /usage: mothership bots/],
    ];
    for (const [args, env, message] of cases) {
      const result = await bots(args, env, elsewhere);
      assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, message, args.join(' '));
    }
  });

  it('without --server, the existing local database of DATA_DIR, which it names', async () => {
    const result = await bots(['list'], { DATA_DIR: app.config.dataDir, ADMIN_TOKEN, MOTHERSHIP_ID: 'test-ms' }, elsewhere);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, new RegExp(`Using the database ${path.join(app.config.dataDir, 'mothership.db')} \\(DATA_DIR=${app.config.dataDir}\\)`));
  });

  it('without --server, an unknown bot: exit 2 with the same reason the server gives, no stack', async () => {
    const env = { DATA_DIR: app.config.dataDir, ADMIN_TOKEN, MOTHERSHIP_ID: 'test-ms' };
    for (const args of [
      ['delete', 'nobody'],
      ['rotate', 'nobody'],
    ]) {
      const result = await bots(args, env, elsewhere);
      assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, /^Bot "nobody" does not exist$/m, args.join(' '));
      assert.doesNotMatch(result.stderr, /DomainError|details:|^\s+at /m, args.join(' '));
    }
  });
});
