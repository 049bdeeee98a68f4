import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import path from 'node:path';
import { spawnMothership, startService, stopProcess } from '../helpers/process.js';
import { freePort } from '../helpers/broker.js';
import { loggerOptions } from '../../src/http/index.js';
import { testConnection } from '../../src/mqtt/connection.js';
import { DEFAULT_SETTINGS } from '../../src/settings/model.js';
import { postJson } from '../../src/webhook/http-client.js';

/** A person who points a URL at the wrong kind of port reads one sentence that says so, not OpenSSL or mqtt-packet. */
describe('connection errors a person can act on', () => {
  let http: Server;
  let port: number;
  before(async () => {
    http = createServer((_request, response) => response.end('ok'));
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    port = (http.address() as AddressInfo).port;
  });
  after(() => http.close());

  const mqtt = (broker_url: string) => testConnection({ ...DEFAULT_SETTINGS.mqtt, enabled: true, broker_url }, 'readable-errors', { timeoutMs: 3000 });

  it('an https:// webhook on a plain HTTP port', async () => {
    const result = await postJson(`https://127.0.0.1:${port}/hook`, '{}', { 'content-type': 'application/json' }, 3000);
    assert.equal(result.error, 'TLS error: that port does not speak TLS; for a plain port use http:// (webhook) or mqtt:// (broker)');
  });

  it('an mqtt:// broker URL on an HTTP port', async () => {
    const result = await mqtt(`mqtt://127.0.0.1:${port}`);
    assert.equal(result.ok, false);
    assert.match(result.error!, /^that port does not speak MQTT \(an HTTP server\?\)/);
  });

  it('an mqtts:// broker URL on a plain port', async () => {
    const result = await mqtt(`mqtts://127.0.0.1:${port}`);
    assert.match(result.error!, /^TLS error: that port does not speak TLS/);
  });
});

describe('a start that cannot succeed says why in one sentence, without a stack trace or a password', () => {
  let dataDir: string;
  let taken: Server;
  before(async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'ms-startup-'));
    taken = createServer().listen(0, '127.0.0.1');
    await once(taken, 'listening');
  });
  after(() => {
    taken.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const start = async (env: Record<string, string>) => {
    const child = spawnMothership(['serve'], { DATA_DIR: dataDir, HOST: '127.0.0.1', ...env });
    const [code] = (await once(child, 'exit')) as [number];
    return { code, output: child.output() };
  };
  /** Exit code 2: a person must fix it; 1: it may pass on its own, so a supervisor starts the service again. */
  const assertOneSentence = ({ code, output }: { code: number; output: string }, expected: RegExp, exitCode = 2) => {
    assert.equal(code, exitCode, output);
    assert.match(output, expected);
    assert.doesNotMatch(output, /^\s+at /m, 'no stack trace');
    assert.doesNotMatch(output, /s3cret/, 'no password');
  };

  it('the port is in use', async () => {
    const port = (taken.address() as AddressInfo).port;
    assertOneSentence(
      await start({ PORT: String(port) }),
      new RegExp(`Port ${port} on 127.0.0.1 is already in use: stop the other process or set PORT to a free port\\.`),
    );
  });

  it('PostgreSQL is not there (yet): exit code 1, so a supervisor starts the service again (outside review)', async () => {
    const closed = createServer().listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const port = (closed.address() as AddressInfo).port;
    closed.close();
    assertOneSentence(
      await start({ PORT: '0', DATABASE_URL: `postgres://app:s3cret@127.0.0.1:${port}/mothership` }),
      new RegExp(`Cannot use the PostgreSQL database 127\\.0\\.0\\.1:${port}/mothership \\(DATABASE_URL\\): connection refused`),
      1,
    );
  });

  it('HOST is not an address or a known name', async () => {
    assertOneSentence(await start({ PORT: '0', HOST: '999.1.1.1' }), /HOST 999\.1\.1\.1 is not an address of this machine: set HOST to one of its addresses/);
  });

  it('REDIS_URL names a database the Redis server does not have', async () => {
    // The shared Redis on 127.0.0.1:6379 has the default 16 databases (0-15).
    assertOneSentence(
      await start({ PORT: '0', REDIS_URL: 'redis://:s3cret@127.0.0.1:6379/99', REDIS_PREFIX: 'readable-errors:' }),
      /^Configuration error: REDIS_URL names database 99, which the Redis server at 127\.0\.0\.1:6379 does not have \(it has 0 to 15\)/m,
    );
  });

  it('DATA_DIR is a file', async () => {
    const file = path.join(dataDir, 'a-file');
    writeFileSync(file, 'x');
    assertOneSentence(
      await start({ PORT: '0', DATA_DIR: file }),
      /Configuration error: DATA_DIR .*a-file cannot be used as a directory \(a file is in the way\)/,
    );
  });

  it('a route costs more than RATE_LIMIT_CAPACITY holds', async () => {
    assertOneSentence(
      await start({ PORT: '0', RATE_LIMIT_CAPACITY: '5' }),
      /Configuration error: RATE_LIMIT_CAPACITY 5 is below what POST \/api\/[^ ]+ costs \(10 tokens, group [a-z-]+\): raise RATE_LIMIT_CAPACITY to at least 10/,
    );
  });

  it("a route of the default group costs more than RATE_LIMIT_CAPACITY holds, or RATE_LIMIT_COSTS names no route's group (outside review: a 429 loop)", async () => {
    assertOneSentence(
      await start({ PORT: '0', RATE_LIMIT_COSTS: 'default=100' }),
      /Configuration error: RATE_LIMIT_CAPACITY 60 is below what [A-Z]+ \/[^ ]* costs \(100 tokens, group default\)/,
    );
    assertOneSentence(
      await start({ PORT: '0', RATE_LIMIT_COSTS: 'sesion=1' }),
      /Configuration error: RATE_LIMIT_COSTS names sesion, which no route has: the groups are default, [a-z_, ]*session/,
    );
  });

  it('the SQLite database is damaged or not a database', async () => {
    const damaged = mkdtempSync(path.join(tmpdir(), 'ms-damaged-'));
    try {
      writeFileSync(path.join(damaged, 'mothership.db'), 'this is not a database, but it is long enough to have a header of its own. '.repeat(20));
      assertOneSentence(
        await start({ PORT: '0', DATA_DIR: damaged }),
        /The SQLite database .*mothership\.db \(DATA_DIR\) is damaged or not a SQLite database: restore it from a backup \(docs\/operations\.md\)\./,
      );
    } finally {
      rmSync(damaged, { recursive: true, force: true });
    }
  });

  it('the database does not exist', async () => {
    assertOneSentence(
      await start({ PORT: '0', DATABASE_URL: 'postgres://postgres:s3cret@127.0.0.1:5432/mothership_never_created' }),
      /the database does not exist; create it first/,
    );
  });
});

describe('the first start, read by a person at a terminal', () => {
  it('says which URL to open and how to sign in, in readable lines; later starts do not repeat the token', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'ms-first-'));
    try {
      const port = await freePort();
      const first = await startService({ DATA_DIR: dataDir, LOG_FORMAT: 'pretty' }, port);
      await new Promise((resolve) => setTimeout(resolve, 300));
      await stopProcess(first.child);
      const output = first.child.output();
      assert.doesNotMatch(output, /^\{"level"/m, 'pretty lines, not JSON');
      const token = readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim();
      assert.match(
        output,
        new RegExp(
          `WARN: First start: open http://127\\.0\\.0\\.1:${port}/ in a browser and sign in with the admin token ${token} \\(kept in ${dataDir}/admin-token; it is not shown again\\)`,
        ),
      );
      const second = await startService({ DATA_DIR: dataDir, LOG_FORMAT: 'json' }, port);
      await stopProcess(second.child);
      assert.match(second.child.output(), /^\{"level":30/m, 'JSON for a log collector');
      assert.equal(second.child.output().includes(token), false, 'the token is shown once');
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('on every interface (HOST=0.0.0.0), names the addresses other devices on the network open too (outside test)', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'ms-first-'));
    try {
      const port = await freePort();
      const first = await startService({ DATA_DIR: dataDir, HOST: '0.0.0.0', LOG_FORMAT: 'json' }, port);
      await stopProcess(first.child);
      const lan = Object.values(networkInterfaces())
        .flat()
        .filter((entry) => entry && !entry.internal && entry.family === 'IPv4')
        .map((entry) => `http://${entry!.address}:${port}/`);
      const message = first.child
        .output()
        .split('\n')
        .find((line) => line.includes('First start'));
      assert.ok(message, first.child.output());
      assert.match(message, new RegExp(`open http://127\\.0\\.0\\.1:${port}/ in a browser`));
      for (const url of lan) assert.ok(message.includes(url), `${url} in ${message}`);
      assert.ok(lan.length > 0 ? message.includes('another device') : !message.includes('another device'), message);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('shows the token at the first start that listens: a first start that failed (its port taken) did not show it (outside review)', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'ms-first-'));
    const taken = createServer().listen(0, '127.0.0.1');
    try {
      await once(taken, 'listening');
      const failed = spawnMothership(['serve'], { DATA_DIR: dataDir, HOST: '127.0.0.1', PORT: String((taken.address() as AddressInfo).port) });
      assert.equal(((await once(failed, 'exit')) as [number])[0], 2, failed.output());
      const token = readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim();
      assert.equal(failed.output().includes(token), false, 'a start that does not listen shows no sign-in');
      const port = await freePort();
      const next = await startService({ DATA_DIR: dataDir, LOG_FORMAT: 'json' }, port);
      await stopProcess(next.child);
      assert.match(next.child.output(), new RegExp(`First start: open http://127\\.0\\.0\\.1:${port}/ in a browser and sign in with the admin token ${token}`));
      const third = await startService({ DATA_DIR: dataDir, LOG_FORMAT: 'json' }, port);
      await stopProcess(third.child);
      assert.equal(third.child.output().includes(token), false, 'shown once it was shown');
    } finally {
      taken.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('is JSON unless asked otherwise or writing to a terminal', () => {
    const transport = (options: unknown) => (options as { transport?: { target: string } }).transport?.target;
    assert.equal(transport(loggerOptions('info', 'auto', false)), undefined);
    assert.equal(transport(loggerOptions('info', 'auto', true)), 'pino-pretty');
    assert.equal(transport(loggerOptions('info', 'json', true)), undefined);
    assert.equal(transport(loggerOptions('info', 'pretty', false)), 'pino-pretty');
  });
});
