import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import {
  matchNotCompleted,
  matchNotFound,
  nonceStoreUnavailable,
  recordExists,
  recordNotFound,
  replayInvalid,
  replayRefused,
  replayUnusable,
} from '../src/enrichment/errors.js';
import { estimateWaitSeconds, jobsAhead, meanJobSeconds, PRIOR_JOB_SECONDS } from '../src/enrichment/estimate.js';
import { retryDelayMs, type JobQueue } from '../src/enrichment/jobs.js';
import { EnrichmentWorker } from '../src/enrichment/worker.js';
import type { Commentary } from '../src/enrichment/commentary.js';
import { eventually } from './helpers/app.js';
import { AtQuota, DAILY_QUOTA, QUOTA_WINDOW_MS, quotaExceeded, quotaLeft, secondsUntil } from '../src/enrichment/quota.js';
import { createHttpServer } from '../src/http/index.js';

describe('enrichment estimate', () => {
  it("counts a job's place from the oldest pending job, itself included", () => {
    assert.equal(jobsAhead(10, 10, null), 1);
    assert.equal(jobsAhead(15, 12, 10), 6);
    assert.equal(jobsAhead(7, null, null), 1);
  });

  it('multiplies by the mean duration, divides by live workers, rounds up, at least 1 s', () => {
    assert.equal(estimateWaitSeconds(3, 5, 1), 15);
    assert.equal(estimateWaitSeconds(3, 5, 2), 8);
    assert.equal(estimateWaitSeconds(1, 0.1, 4), 1);
    assert.equal(estimateWaitSeconds(2, 5, 0), 10);
  });

  it('takes the mean of the finished jobs, the prior when none finished', () => {
    const at = (seconds: number) => new Date(Date.UTC(2026, 10, 25, 0, 0, seconds)).toISOString();
    assert.equal(
      meanJobSeconds([
        { started_at: at(0), finished_at: at(2) },
        { started_at: at(10), finished_at: at(14) },
        { started_at: at(20), finished_at: null },
      ]),
      3,
    );
    assert.equal(meanJobSeconds([]), PRIOR_JOB_SECONDS);
  });
});

describe('enrichment quota', () => {
  const nowMs = Date.UTC(2026, 10, 25, 12);
  const hoursAgo = (hours: number) => new Date(nowMs - hours * 3600_000).toISOString();

  it('counts down the requests left and the seconds until the oldest counted job leaves the window', () => {
    assert.deepEqual(quotaLeft(0, null, nowMs), { remaining: DAILY_QUOTA, resetSeconds: 0 });
    assert.deepEqual(quotaLeft(2, hoursAgo(23), nowMs), { remaining: DAILY_QUOTA - 2, resetSeconds: 3600 });
    assert.equal(secondsUntil(nowMs + 1, nowMs), 1, 'rounded up, at least 1');
    assert.equal(secondsUntil(nowMs - 5000, nowMs), 1);
  });

  it('remembers a bot at its quota until its oldest job leaves the window, then forgets it', () => {
    const atQuota = new AtQuota();
    const freeAtMs = nowMs + 90_000;
    atQuota.remember('bot', freeAtMs);
    assert.equal(atQuota.refusal('bot', nowMs)?.retryAfterSeconds, 90);
    assert.equal(atQuota.refusal('bot', freeAtMs), null, 'free once the job left the window');
    assert.equal(atQuota.refusal('other', nowMs), null);
    atQuota.forget();
    assert.equal(atQuota.refusal('bot', nowMs), null);
    assert.equal(QUOTA_WINDOW_MS, 86_400_000);
  });
});

describe('enrichment job retries', () => {
  it('backs off by the base, then 4 x the base', () => {
    assert.deepEqual(
      [1, 2].map((attempts) => retryDelayMs(attempts, 1000)),
      [1000, 4000],
    );
  });
});

describe("the enrichment room's refusals at the HTTP edge", () => {
  let app: FastifyInstance;
  let thrown: Error;
  before(async () => {
    app = await createHttpServer({ logLevel: 'silent', trustProxy: false, version: 'test' });
    app.get('/throw', { config: { auth: 'public' } }, async () => {
      throw thrown;
    });
    await app.ready();
  });
  after(() => app.close());

  const answer = async (error: Error) => {
    thrown = error;
    const response = await app.inject({ method: 'GET', url: '/throw' });
    return { status: response.statusCode, headers: response.headers, body: response.json() as Record<string, any> };
  };

  it('keeps the status, code and detail clients depend on', async () => {
    const cases: [Error, number, string, string][] = [
      [recordNotFound('Bot', 'b'), 404, 'not_found', 'Bot "b" does not exist'],
      [recordExists('Match', 'm'), 409, 'conflict', 'Match "m" already exists'],
      [matchNotFound('m'), 404, 'match_not_found', 'Match "m" does not exist'],
      [matchNotCompleted('m', 'scheduled'), 409, 'match_not_completed', 'Match "m" is scheduled, not completed'],
      [replayUnusable('m'), 409, 'replay_unusable', 'Match "m" has no replay to write commentary from; set one with PATCH /api/matches/m'],
      [nonceStoreUnavailable(), 503, 'service_unavailable', 'Replay protection is unavailable; try again shortly'],
    ];
    for (const [error, status, code, detail] of cases) {
      const { body } = await answer(error);
      assert.deepEqual([body.status, body.code, body.detail], [status, code, detail]);
    }
    assert.equal((await answer(nonceStoreUnavailable())).headers['retry-after'], '5');
  });

  it('names the field of a refused replay, in the body and in the match', async () => {
    const written = (await answer(replayRefused('/replay/players', 'must list at least two players'))).body;
    assert.deepEqual(
      [written.status, written.code, written.errors],
      [400, 'validation_failed', [{ path: '/replay/players', message: 'must list at least two players' }]],
    );
    const stored = (await answer(replayInvalid('m', '/replay/events/0/t', 'is too large'))).body;
    assert.deepEqual([stored.status, stored.code, stored.errors], [400, 'replay_invalid', [{ path: '/replay/events/0/t', message: 'is too large' }]]);
  });

  it('answers a bot at its quota with Retry-After and the violated policy', async () => {
    const nowMs = Date.now();
    const { headers, body } = await answer(quotaExceeded('b', nowMs + 42_000, nowMs));
    assert.deepEqual([body.status, body.code, body['violated-policies']], [429, 'quota_exceeded', ['daily']]);
    assert.equal(body.detail, `Bot "b" has used its ${DAILY_QUOTA} enrichment requests of the last 24 hours`);
    assert.equal(headers['retry-after'], '42');
  });
});

describe('enrichment worker', () => {
  it('a database away is one warning an outage, not an error with a stack each second; any other failure is an error', async () => {
    const lines: string[] = [];
    const record = (level: string) => (_fields: unknown, message: string) => void lines.push(`${level}: ${message}`);
    const log = { warn: record('warn'), error: record('error'), info: record('info'), debug: () => {} } as unknown as FastifyBaseLogger;
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const claims: Array<Error | null> = [refused, refused, refused, null, refused, new Error('a bug')];
    const queue = {
      heartbeat: async () => {},
      retire: async () => {},
      nextDue: async () => null,
      claim: async () => {
        const next = claims.shift();
        if (next) throw next;
        return null;
      },
    } as unknown as JobQueue;
    const worker = new EnrichmentWorker({ commitMark: () => null }, queue, {} as Commentary, log, null, { leaseMs: 1000 });
    await worker.start();
    try {
      await eventually(() => {
        worker.notify();
        return claims.length === 0;
      }, 30_000);
    } finally {
      await worker.stop();
    }
    const unavailable = 'warn: enrichment worker: the database is unavailable; trying again every second';
    assert.deepEqual(lines, [unavailable, unavailable, 'error: enrichment worker error']);
  });
});
