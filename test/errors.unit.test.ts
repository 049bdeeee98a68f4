import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';
import { createHttpServer } from '../src/http/index.js';
import { tmpdir } from 'node:os';
import { DomainError, invalid } from '../src/errors.js';
import { startupFailure } from '../src/ops/startup-errors.js';

/**
 * Domain errors carry no HTTP: the shell's one error handler turns any `DomainError` (whichever room
 * defines it) into problem+json, its code the problem code, its status from the problem registry.
 */
describe('domain errors at the HTTP edge', () => {
  let app: FastifyInstance;
  const thrown: Record<string, () => Error> = {
    quota: () => new DomainError('quota_exceeded', 'used up', { retryAfterSeconds: 42, violatedPolicies: ['daily'] }),
    field: () => invalid('/name', 'must not be blank'),
    // A room's own subclass, as the enrichment room defines its errors.
    subclass: () => new (class MatchNotFound extends DomainError {})('match_not_found', 'no such match'),
    unknown: () => new DomainError('no_such_problem_code', 'a code the registry lacks'),
  };
  before(async () => {
    app = await createHttpServer({ logLevel: 'silent', trustProxy: false, version: 'test' });
    app.get('/throw/:which', { config: { auth: 'public' } }, async (request) => {
      throw thrown[(request.params as { which: string }).which]!();
    });
    await app.ready();
  });
  after(() => app.close());

  const call = async (which: string) => {
    const response = await app.inject({ method: 'GET', url: `/throw/${which}` });
    return { status: response.statusCode, headers: response.headers, body: response.json() as Record<string, unknown> };
  };

  it('answers the problem of its code, with Retry-After and the violated policies', async () => {
    const { status, headers, body } = await call('quota');
    assert.equal(status, 429);
    assert.equal(headers['content-type'], 'application/problem+json; charset=utf-8');
    assert.equal(headers['retry-after'], '42');
    assert.deepEqual(body, {
      type: '/problems/quota_exceeded',
      title: 'Quota exceeded',
      status: 429,
      detail: 'used up',
      code: 'quota_exceeded',
      'violated-policies': ['daily'],
    });
  });

  it('names the offending field', async () => {
    const { status, body } = await call('field');
    assert.equal(status, 400);
    assert.deepEqual(body.errors, [{ path: '/name', message: 'must not be blank' }]);
    assert.equal(body.code, 'validation_failed');
  });

  it("maps a room's own subclass the same way", async () => {
    const { status, body } = await call('subclass');
    assert.equal(status, 404);
    assert.equal(body.code, 'match_not_found');
  });

  it('answers 500 for a code the problem registry lacks, without its detail', async () => {
    const { status, body } = await call('unknown');
    assert.equal(status, 500);
    assert.equal(body.code, 'internal_error');
    assert.doesNotMatch(JSON.stringify(body), /registry lacks/);
  });
});

describe('start-up failures on SQLite', () => {
  const config = { databaseUrl: null, dataDir: tmpdir(), host: '127.0.0.1', port: 8080 };
  it('a full disk, however it is reported, is one sentence and passes once space is freed; any other I/O error names its code', () => {
    for (const code of ['ENOSPC', 'SQLITE_FULL']) {
      const failure = startupFailure(Object.assign(new Error('full'), { code }), config);
      assert.equal(failure?.passes, true, code);
      assert.match(failure?.sentence ?? '', /the disk is full; free space and start again/, code);
    }
    const io = startupFailure(Object.assign(new Error('io'), { code: 'SQLITE_IOERR_READ' }), config);
    assert.equal(io?.passes, true);
    assert.match(io?.sentence ?? '', /a disk I\/O error \(SQLITE_IOERR_READ\); check the disk/, 'a disk with room is not called full');
    assert.equal(startupFailure(Object.assign(new Error('denied'), { code: 'EACCES' }), config)?.passes, false, 'a person must fix permissions');
  });
});
