import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startTestApp, type TestApp } from './helpers/app.js';
import { setTimeout as delay } from 'node:timers/promises';
import perfHooks from 'node:perf_hooks';
import { HTTP_DURATION_BUCKETS, Metrics } from '../src/ops/index.js';
import { EVENT_LOOP_SAMPLE_MS } from '../src/ops/event-loop-delay.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
/** promtool, as an operator's Prometheus reads the scrape and the rules; a missing one fails the test (README, "Test it"). */
function promtool(args: string[], input?: string) {
  const result = spawnSync('promtool', args, { input, encoding: 'utf8' });
  if (result.error) throw new Error(`promtool is needed (Debian package prometheus; .ci/run installs it): ${result.error.message}`);
  return result;
}

/** The series of a metric in a scrape: their label sets and values. */
function series(scrape: string, name: string): { labels: Record<string, string>; value: number }[] {
  return scrape
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`))
    .map((line) => {
      const [, labels, value] = /^[^{]+\{(.*)\} (\S+)$/.exec(line)!;
      return { labels: Object.fromEntries([...labels!.matchAll(/(\w+)="([^"]*)"/g)].map((match) => [match[1]!, match[2]!])), value: Number(value) };
    });
}

/** The alert rules of docs/operations.md, as an operator would copy them. */
const documentedRules = () => /### Alert rules[\s\S]*?```yaml\n([\s\S]*?)```/.exec(readFileSync(`${root}docs/operations.md`, 'utf8'))![1]!;

describe('RED metrics', () => {
  let app: TestApp;
  let scrape: string;
  before(async () => {
    app = await startTestApp('sqlite', { STORAGE_BUDGET_MB: '64' });
    assert.equal((await app.api('GET', '/api/persons')).status, 200);
    assert.equal((await app.api('GET', '/api/persons/nobody')).status, 404);
    assert.equal((await app.api('GET', '/api/persons/someone-else')).status, 404);
    assert.equal((await app.api('GET', '/no/such/route/a1b2c3')).status, 404);
    assert.equal((await app.api('DELETE', '/api/system/health')).status, 405);
    assert.equal((await app.api('POST', '/api/persons', { name: '' })).status, 400);
    scrape = (await app.api('GET', '/metrics')).body as string;
  });
  after(() => app.cleanup());

  it('counts requests by route template, method and status class', () => {
    const requests = series(scrape, 'mothership_http_requests_total');
    const count = (route: string, method: string, statusClass: string) =>
      requests.find((entry) => entry.labels.route === route && entry.labels.method === method && entry.labels.status_class === statusClass)?.value;
    assert.equal(count('/api/persons', 'GET', '2xx'), 1);
    assert.equal(count('/api/persons/:id', 'GET', '4xx'), 2);
    assert.equal(count('/api/persons', 'POST', '4xx'), 1);
    assert.equal(count('unmatched', 'GET', '4xx'), 1);
    assert.equal(count('unmatched', 'DELETE', '4xx'), 1);
  });

  it('never labels a series with a URL', () => {
    for (const name of ['mothership_http_requests_total', 'mothership_http_request_duration_seconds_bucket'])
      for (const { labels } of series(scrape, name)) assert.doesNotMatch(labels.route!, /nobody|someone-else|a1b2c3/);
  });

  it('has a latency histogram by route with the buckets docs/operations.md names', () => {
    const buckets = series(scrape, 'mothership_http_request_duration_seconds_bucket').filter(
      (entry) => entry.labels.route === '/api/persons/:id' && entry.labels.method === 'GET',
    );
    assert.deepEqual(
      buckets.map((entry) => entry.labels.le),
      [...HTTP_DURATION_BUCKETS.map(String), '+Inf'],
    );
    assert.equal(buckets.at(-1)!.value, 2);
    const documented = /with the buckets ([\d., and]+) seconds/.exec(readFileSync(`${root}docs/operations.md`, 'utf8').replace(/\s+/g, ' '))![1]!;
    assert.deepEqual(documented.split(/, | and /).map(Number), HTTP_DURATION_BUCKETS);
  });

  it('passes promtool check metrics', () => {
    const result = promtool(['check', 'metrics'], scrape);
    assert.equal(result.status, 0, result.stdout + result.stderr);
  });

  it("the documented alert rules pass promtool check rules and name this service's metrics", () => {
    const rules = documentedRules();
    const dir = mkdtempSync(path.join(tmpdir(), 'mothership-rules-'));
    try {
      writeFileSync(path.join(dir, 'mothership.rules.yml'), rules);
      const result = promtool(['check', 'rules', path.join(dir, 'mothership.rules.yml')]);
      assert.equal(result.status, 0, result.stdout + result.stderr);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    for (const metric of rules.matchAll(/\b(mothership_\w+?)(?:_bucket)?\b[{[ ]/g))
      assert.match(scrape, new RegExp(`^# TYPE ${metric[1]} `, 'm'), `${metric[1]} is not exported`);
  });
});

describe('process metrics at idle', () => {
  const DAY_MS = 86_400_000;
  /** The periods of the event-loop samplers started meanwhile that wake the loop within a day: prom-client's (`monitorEventLoopDelay`) or a timer. */
  async function samplersStartedBy(run: () => Promise<void> | void): Promise<number[]> {
    const periods: number[] = [];
    const monitor = perfHooks.monitorEventLoopDelay;
    const every = globalThis.setInterval;
    perfHooks.monitorEventLoopDelay = (options) => {
      const histogram = monitor(options);
      const enable = histogram.enable.bind(histogram);
      histogram.enable = () => (periods.push(options?.resolution ?? 10), enable());
      return histogram;
    };
    globalThis.setInterval = ((callback: () => void, ms?: number) => (periods.push(ms ?? 0), every(callback, ms))) as typeof setInterval;
    try {
      await run();
    } finally {
      perfHooks.monitorEventLoopDelay = monitor;
      globalThis.setInterval = every;
    }
    return periods.filter((period) => period < DAY_MS);
  }
  const gauge = (scrape: string, statistic: string) =>
    Number(new RegExp(`^mothership_nodejs_eventloop_lag_${statistic}_seconds (\\S+)$`, 'm').exec(scrape)![1]);
  /** Blocks the event loop for `ms`, as a slow synchronous task would. */
  const stall = (ms: number) => {
    const until = performance.now() + ms;
    while (performance.now() < until);
  };

  it("samples the event loop's delay only once scraped, every EVENT_LOOP_SAMPLE_MS (an idle service is not woken ten times a second)", async () => {
    let metrics!: Metrics;
    assert.deepEqual(await samplersStartedBy(() => void (metrics = new Metrics())), [], 'a sampler wakes the loop before any scrape');
    try {
      let first = '';
      assert.deepEqual(await samplersStartedBy(async () => void (first = await metrics.registry.metrics())), [EVENT_LOOP_SAMPLE_MS]);
      assert.ok(EVENT_LOOP_SAMPLE_MS >= 100);
      assert.equal(gauge(first, 'max'), 0, 'the first scrape has no sample to report');
      assert.deepEqual(await samplersStartedBy(async () => void (await metrics.registry.metrics())), [], 'a second sampler');
    } finally {
      metrics.close();
    }
  });

  it('reports a stall that starts right after a scrape, how late the ticks came (not their period), and repeats its figures when nothing new was sampled', async () => {
    const metrics = new Metrics();
    try {
      await metrics.registry.metrics();
      await delay(3 * EVENT_LOOP_SAMPLE_MS);
      await metrics.registry.metrics();
      stall(500);
      await delay(5 * EVENT_LOOP_SAMPLE_MS);
      // Two scrapes in one turn: the second has no new sample, and repeats the first's figures.
      const [scrape, again] = await Promise.all([metrics.registry.metrics(), metrics.registry.metrics()]);
      // The tick due during the stall came at least the stall less one period late.
      assert.ok(gauge(scrape, 'max') >= 0.5 - EVENT_LOOP_SAMPLE_MS / 1000 - 0.01, `max ${gauge(scrape, 'max')} s after a 500 ms stall`);
      // The ticks after the stall came on time: a sampler reporting its period would read at least 0.1 s.
      assert.ok(gauge(scrape, 'min') < (0.9 * EVENT_LOOP_SAMPLE_MS) / 1000, `min ${gauge(scrape, 'min')} s`);
      for (const statistic of ['min', 'max', 'p99']) assert.equal(gauge(again, statistic), gauge(scrape, statistic), statistic);
    } finally {
      metrics.close();
    }
  });
});
