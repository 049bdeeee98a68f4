import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config.js';
import { DAILY_QUOTA } from '../src/enrichment/queue.js';
import { backoffDelay } from '../src/mqtt/backoff.js';
import { MAX_WEBHOOK_ATTEMPTS, outcomeOf } from '../src/webhook/policy.js';

/** The seed's numbers as configured by default; the rest of the suite runs on fast values, so these are read here. */
describe('seed defaults', () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'mothership-config-'));
  const config = loadConfig({ DATA_DIR: dataDir, ADMIN_TOKEN: 'a-long-enough-admin-token' });
  rmSync(dataDir, { recursive: true, force: true });

  it('webhook: one retry, 30 s after the first attempt; 15 s per attempt', () => {
    assert.equal(config.webhookRetryDelayMs, 30_000);
    assert.equal(config.webhookTimeoutMs, 15_000, 'Standard Webhooks recommends 15 to 30 s');
    assert.equal(MAX_WEBHOOK_ATTEMPTS, 2);
    assert.equal(outcomeOf({ statusCode: 503, error: null }, 1), 'retry');
    assert.equal(outcomeOf({ statusCode: 503, error: null }, 2), 'failed');
  });

  it('MQTT reconnects after 5 s, doubling to at most 120 s', () => {
    assert.deepEqual([1, 2, 3, 4, 5, 6, 7, 20].map((attempt) => backoffDelay(attempt, config.mqttBackoffInitialMs, config.mqttBackoffMaxMs)), [5_000, 10_000, 20_000, 40_000, 80_000, 120_000, 120_000, 120_000]);
  });

  it('health every 60 s, away after 60 s, nodes offline after 30 s, 5 enrichment requests per bot per day', () => {
    assert.equal(config.healthIntervalMs, 60_000);
    assert.equal(config.mqttBirthDelayMaxMs, 3_000);
    assert.equal(config.presenceAwayDelayMs, 60_000);
    assert.equal(config.nodeTimeoutMs, 30_000);
    assert.equal(DAILY_QUOTA, 5);
  });

  it('rate limit: 60 tokens, refilled at 1 per second', () => {
    assert.equal(config.rateLimit.capacity, 60);
    assert.equal(config.rateLimit.refillPerSecond, 1);
  });
});
