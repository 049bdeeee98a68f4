import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { storageFailure } from '../src/db/index.js';
import { WriteHealth } from '../src/db/errors.js';
import { redisUnreachable, serviceTarget } from '../src/ops/index.js';
import pino from 'pino';
import { ThrottledLog } from '../src/http/index.js';

describe('storageFailure: the database errors that mean its disk or resources', () => {
  it('classifies SQLite and PostgreSQL codes in words', () => {
    assert.equal(storageFailure({ code: 'SQLITE_FULL' }), 'disk full');
    assert.equal(storageFailure({ code: '53100' }), 'disk full');
    assert.equal(storageFailure({ code: 'SQLITE_IOERR_WRITE' }), 'disk I/O error');
    assert.equal(storageFailure({ code: 'SQLITE_IOERR' }), 'disk I/O error');
    assert.equal(storageFailure({ code: '53200' }), 'out of resources');
    assert.equal(storageFailure({ code: '53300' }), 'out of resources');
  });

  it('leaves every other error alone', () => {
    for (const error of [
      { code: 'SQLITE_CONSTRAINT_UNIQUE' },
      { code: '23505' },
      { code: 'ECONNREFUSED' },
      { code: 5310 },
      new Error('x'),
      null,
      undefined,
      'SQLITE_FULL',
    ])
      assert.equal(storageFailure(error), null, JSON.stringify(error));
  });
});

describe('WriteHealth', () => {
  it('reports a storage failure until a write succeeds, and forgets it after 10 s without another', () => {
    const health = new WriteHealth();
    assert.equal(health.state(), 'ok');
    health.observe({ code: '23505' });
    assert.equal(health.state(), 'ok', 'a conflict says nothing about the disk');
    health.observe({ code: 'SQLITE_FULL' });
    assert.equal(health.state(), 'disk full');
    assert.equal(health.state(Date.now() + 9_000), 'disk full');
    assert.equal(health.state(Date.now() + 10_001), 'ok');
    health.observe({ code: 'SQLITE_FULL' });
    // A commit that changed nothing (a background task finding no work) wrote nothing: it says
    // nothing about the disk either (outside review: /readyz said ready while every write failed).
    health.observe(undefined, false);
    assert.equal(health.state(), 'disk full');
    health.observe();
    assert.equal(health.state(), 'ok');
  });
});

describe('redisUnreachable', () => {
  const url = 'redis://mothership:pa55word@cache.lan:6380/3';
  it('names host, port and database with the reason, never the credentials', () => {
    const sentence = redisUnreachable(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }), url);
    assert.equal(sentence, 'Redis cache.lan:6380/3 (REDIS_URL) is unreachable: connection refused; is Redis running on that host and port?');
    assert.doesNotMatch(sentence, /pa55word|mothership/);
  });

  it('reads a refused password from the reply, and says "no answer" without an error', () => {
    assert.match(redisUnreachable(new Error('WRONGPASS invalid username-password pair or user is disabled.'), url), /the user or password was refused$/);
    assert.equal(redisUnreachable(null, 'redis://localhost'), 'Redis localhost:6379/0 (REDIS_URL) is unreachable: no answer');
  });

  it('says the server lacks the database, when Redis came up after the start and refused its SELECT', () => {
    assert.equal(
      redisUnreachable(new Error('ERR DB index is out of range'), url),
      'Redis cache.lan:6380/3 (REDIS_URL): the server has no database 3; the service uses database 0 until it is fixed',
    );
  });

  it('serviceTarget keeps a URL it cannot read out of the sentence', () => {
    assert.equal(serviceTarget('not a url', 6379, '/0'), '(unreadable URL)');
  });
});

/** A real pino logger writing into an array. */
function capture() {
  const lines: { level: number; msg: string; more?: number; err?: { message: string } }[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { log, lines };
}

describe('ThrottledLog for background tasks', () => {
  it('writes storage failures a line per reason a window, whatever the task, and everything else as it comes', () => {
    const { log, lines } = capture();
    const throttled = new ThrottledLog(log);
    const background = throttled.background(log);
    const full = Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    for (let attempt = 0; attempt < 50; attempt++) {
      background.warn({ err: full }, 'webhook dispatch failed');
      background.error({ err: full }, 'enrichment worker error');
    }
    background.warn({ err: new Error('receiver timed out') }, 'webhook dispatch failed');
    background.warn({ err: new Error('receiver timed out') }, 'webhook dispatch failed');
    background.info('retention: expired rows deleted');
    assert.deepEqual(
      lines.map((line) => [line.level, line.msg]),
      [
        [50, 'database cannot write: disk full'],
        [40, 'webhook dispatch failed'],
        [40, 'webhook dispatch failed'],
        [30, 'retention: expired rows deleted'],
      ],
    );
    throttled.flush();
    assert.deepEqual([lines.at(-1)!.msg, lines.at(-1)!.more], ['database cannot write: disk full (99 more since)', 99]);
  });

  it("writes a task's failures while a backing service is away a line per task a window (outside review: 435 lines a minute)", () => {
    const { log, lines } = capture();
    const throttled = new ThrottledLog(log);
    const background = throttled.background(log);
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const terminated = new Error('Connection terminated unexpectedly');
    for (let attempt = 0; attempt < 60; attempt++) {
      background.warn({ err: attempt % 2 ? refused : terminated }, 'away sweep failed');
      background.warn({ err: refused }, 'webhook dispatch failed');
      background.error({ err: refused }, 'enrichment worker error');
    }
    assert.deepEqual(
      lines.map((line) => [line.level, line.msg]),
      [
        [40, 'away sweep failed'],
        [40, 'webhook dispatch failed'],
        [50, 'enrichment worker error'],
      ],
    );
    assert.match(lines[0]!.err!.message, /Connection terminated/, 'the first line keeps its error');
    throttled.flush();
    assert.deepEqual(
      lines.slice(3).map((line) => line.more),
      [59, 59, 59],
    );
  });
});
