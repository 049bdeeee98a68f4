import { after, before, describe, it } from 'node:test';
import { BASELINE_RECORD_LIMIT, TEXT_LIMITS } from '../src/limits.js';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, writeFileSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Validator } from '@cfworker/json-schema';
import { baselineErrors, BASELINE_SCHEMA_PATH, type BaselineRecord } from '../src/baselines/schema.js';
import { compareBaselines } from '../src/baselines/compare.js';
import { DEFAULT_DETECTION, detectRegression, type Detection, type Run } from '../src/baselines/detect.js';
import { formatReport } from '../src/baselines/format.js';
import { ADMIN_TOKEN, DIALECTS, startTestApp, type TestApp } from './helpers/app.js';
import { freePort } from './helpers/broker.js';
import { MAIN } from './helpers/process.js';

const valid: BaselineRecord = {
  commit_sha: 'a1b2c3d',
  timestamp: '2026-11-21T22:00:00.000Z',
  subject_geomean: 0.5,
  alpha_geomean: 1.5,
  beta_geomean: 1.0,
  gamma_geomean: 2.0,
  grep_1000_mean_ms: 40,
  throughput_mb_per_sec: 400,
  files_per_sec: 2500,
  total_runtime_sec: 180,
  corpus_size: 1000,
  notes: 'ci',
};

const REQUIRED = ['commit_sha', 'timestamp', 'subject_geomean', 'grep_1000_mean_ms'] as const;
const NUMERIC = [
  'subject_geomean',
  'alpha_geomean',
  'beta_geomean',
  'gamma_geomean',
  'grep_1000_mean_ms',
  'throughput_mb_per_sec',
  'files_per_sec',
  'total_runtime_sec',
  'corpus_size',
] as const;

/** [name, record, valid?, path of the violation] */
const cases: [string, unknown, boolean, string?][] = [
  ['the full valid record', valid, true],
  ['only the required fields', { commit_sha: 'main', timestamp: '2026-01-01T00:00:00Z', subject_geomean: 0, grep_1000_mean_ms: 0 }, true],
  ...REQUIRED.map((field): [string, unknown, boolean, string] => {
    const record: Record<string, unknown> = { ...valid };
    delete record[field];
    return [`missing ${field}`, record, false, `/${field}`];
  }),
  ...['extra', 'subject', 'delta_geomean', 'Commit_sha'].map((field): [string, unknown, boolean, string] => [
    `unknown property ${field}`,
    { ...valid, [field]: 1 },
    false,
    `/${field}`,
  ]),
  ...NUMERIC.map((field): [string, unknown, boolean, string] => [`negative ${field}`, { ...valid, [field]: -1 }, false, `/${field}`]),
  ...NUMERIC.map((field): [string, unknown, boolean, string] => [`string in ${field}`, { ...valid, [field]: '1' }, false, `/${field}`]),
  ['commit_sha of 6 hex characters', { ...valid, commit_sha: 'abcdef' }, false, '/commit_sha'],
  ['commit_sha of 7 hex characters', { ...valid, commit_sha: 'abcdef0' }, true],
  ['commit_sha of 40 hex characters', { ...valid, commit_sha: 'a'.repeat(40) }, true],
  ['commit_sha of 41 hex characters', { ...valid, commit_sha: 'a'.repeat(41) }, false, '/commit_sha'],
  ['upper-case hex commit_sha', { ...valid, commit_sha: 'ABCDEF0123' }, true],
  ['non-hex commit_sha', { ...valid, commit_sha: 'abcdefg' }, false, '/commit_sha'],
  ['commit_sha main', { ...valid, commit_sha: 'main' }, true],
  ['commit_sha xmain (the seed regex would accept it)', { ...valid, commit_sha: 'xmain' }, false, '/commit_sha'],
  ['commit_sha feature/main', { ...valid, commit_sha: 'feature/main' }, false, '/commit_sha'],
  ['commit_sha Main', { ...valid, commit_sha: 'Main' }, false, '/commit_sha'],
  ['commit_sha main with a newline', { ...valid, commit_sha: 'main\n' }, false, '/commit_sha'],
  ['corpus_size not an integer', { ...valid, corpus_size: 10.5 }, false, '/corpus_size'],
  ['corpus_size 1000.0 is an integer', { ...valid, corpus_size: 1000.0 }, true],
  ['null in an optional field', { ...valid, alpha_geomean: null }, false, '/alpha_geomean'],
  ['null in notes', { ...valid, notes: null }, false, '/notes'],
  ['timestamp without an offset', { ...valid, timestamp: '2026-11-21T22:00:00' }, false, '/timestamp'],
  ['timestamp as a date only', { ...valid, timestamp: '2026-11-21' }, false, '/timestamp'],
  ['timestamp with an offset', { ...valid, timestamp: '2026-11-21T23:00:00+01:00' }, true],
  ['timestamp with a lower-case t and z', { ...valid, timestamp: '2026-11-21t22:00:00z' }, true],
  ['timestamp with an offset in hours only (outside review: a 500)', { ...valid, timestamp: '2026-11-21T23:00:00+01' }, false, '/timestamp'],
  ['timestamp with an offset without its colon', { ...valid, timestamp: '2026-11-21T23:00:00+0100' }, false, '/timestamp'],
  ['an array body', [valid], false, '/'],
  ['a string body', 'a1b2c3d', false, '/'],
  ['null body', null, false, '/'],
];

/** The JSON pointers of every number in `value` that JSON cannot carry (NaN, Infinity). */
function nonFinite(value: unknown, path = ''): string[] {
  if (typeof value === 'number') return Number.isFinite(value) ? [] : [`${path} = ${value}`];
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([key, entry]) => nonFinite(entry, `${path}/${key}`));
}

describe('baseline schema', () => {
  const independent = new Validator(JSON.parse(readFileSync(BASELINE_SCHEMA_PATH, 'utf8')), '2020-12', false);

  for (const [name, record, expected, pointer] of cases) {
    it(`${expected ? 'accepts' : 'rejects'} ${name}`, () => {
      const errors = baselineErrors(record);
      assert.equal(errors.length === 0, expected, JSON.stringify(errors));
      if (pointer)
        assert.ok(
          errors.some((error) => error.path === pointer),
          `expected ${pointer} in ${JSON.stringify(errors)}`,
        );
      // The schema file itself, under a second validator that shares no code with Ajv.
      assert.equal(independent.validate(record).valid, expected, `@cfworker/json-schema disagrees on: ${name}`);
    });
  }

  it('refuses a run stamped in year 9999 (it would stay "latest" for good) or before 1970 (outside attack)', () => {
    // The bounds are instants: a time of 1970 or 2099 is measured in UTC, its offset included.
    for (const timestamp of [
      '9999-12-31T23:59:60Z',
      '2100-01-01T00:00:00Z',
      '0000-01-01T00:00:00+23:59',
      '1969-12-31T23:59:59Z',
      '1970-01-01T00:30:00+01:00',
      '2099-12-31T23:00:00-05:00',
    ]) {
      assert.deepEqual(baselineErrors({ ...valid, timestamp }), [{ path: '/timestamp', message: 'must be a time from 1970 up to 2100' }], timestamp);
    }
    for (const timestamp of ['2099-12-31T23:59:59Z', '2016-12-31T23:59:60Z', '1970-01-01T00:00:00Z', '1970-01-01T00:30:00-01:00', '2099-12-31T20:00:00-03:59'])
      assert.deepEqual(baselineErrors({ ...valid, timestamp }), [], timestamp);
  });

  it('reports every violation, not only the first', () => {
    const errors = baselineErrors({ commit_sha: 'nope', subject_geomean: -1, extra: true });
    const paths = errors.map((error) => error.path).sort();
    assert.deepEqual(paths, ['/commit_sha', '/extra', '/grep_1000_mean_ms', '/subject_geomean', '/timestamp']);
  });
});

describe('baseline comparison', () => {
  it('judges each field in its own direction and flags regressions beyond the threshold', () => {
    const head = { ...valid, commit_sha: 'b2c3d4e', subject_geomean: 0.6, grep_1000_mean_ms: 42, throughput_mb_per_sec: 300, files_per_sec: 3000 };
    const report = compareBaselines(valid, head, 10);
    const byField = Object.fromEntries(report.metrics.map((metric) => [metric.field, metric]));
    assert.equal(byField.subject_geomean!.change_pct, 20);
    assert.equal(byField.subject_geomean!.regression, true);
    assert.equal(byField.grep_1000_mean_ms!.change_pct, 5);
    assert.equal(byField.grep_1000_mean_ms!.status, 'worse', 'worse within the threshold is not labelled a regression');
    assert.equal(byField.grep_1000_mean_ms!.regression, false, '5% is within the threshold');
    assert.equal(byField.subject_geomean!.status, 'regressed');
    assert.equal(byField.throughput_mb_per_sec!.change_pct, -25);
    assert.equal(byField.throughput_mb_per_sec!.regression, true, 'lower throughput is worse');
    assert.equal(byField.files_per_sec!.status, 'improved');
    assert.equal(byField.files_per_sec!.regression, false);
    assert.equal(report.regressed, true);
    assert.deepEqual(report.regressions, ['subject_geomean', 'throughput_mb_per_sec', 'speedup_vs_alpha', 'speedup_vs_beta', 'speedup_vs_gamma']);
  });

  it('computes percentages from the stored numbers, not from rounded speedups', () => {
    // alpha 1.0 / subject 0.9 = 1.1111...; 1.0 / 1.0 = 1: a drop of exactly 10 %, and a subject 11.11 % slower.
    const base = { ...valid, subject_geomean: 0.9, alpha_geomean: 1.0 };
    const head = { ...valid, subject_geomean: 1.0, alpha_geomean: 1.0 };
    const report = compareBaselines(base, head, 10);
    const alpha = report.speedups.find((entry) => entry.tool === 'alpha')!;
    assert.equal(alpha.base, 1.111, 'shown rounded');
    assert.equal(alpha.change_pct, -10, 'from 1.1111... to 1: -10 %, not -9.991 % from the rounded 1.111');
    assert.equal(alpha.status, 'worse', 'exactly the threshold is not beyond it');
    assert.equal(report.metrics.find((metric) => metric.field === 'subject_geomean')!.change_pct, 11.11);
    const reference = report.metrics.find((metric) => metric.field === 'alpha_geomean')!;
    assert.equal(
      compareBaselines(valid, { ...valid, alpha_geomean: valid.alpha_geomean! * 2 }).metrics.find((metric) => metric.field === 'alpha_geomean')!.status,
      'worse',
      'a reference tool is never "regressed"',
    );
    assert.equal(reference.status, 'unchanged');
  });

  it('computes within-run speedups that cancel out machine speed', () => {
    // Everything twice as slow (a slower machine): no regression.
    const slower = { ...valid, commit_sha: 'c3d4e5f', subject_geomean: 1.0, alpha_geomean: 3.0, beta_geomean: 2.0, gamma_geomean: 4.0, grep_1000_mean_ms: 40 };
    const report = compareBaselines(valid, slower, 10);
    assert.deepEqual(
      report.speedups.map((entry) => [entry.tool, entry.base, entry.head, entry.change_pct]),
      [
        ['alpha', 3, 3, 0],
        ['beta', 2, 2, 0],
        ['gamma', 4, 4, 0],
      ],
    );
    assert.deepEqual(report.regressions, ['subject_geomean']);
    assert.equal(report.metrics.find((metric) => metric.field === 'alpha_geomean')!.regression, false, 'reference tools never flag a regression');
  });

  it('handles absent and zero fields without NaN or Infinity', () => {
    const base = { commit_sha: 'main', timestamp: valid.timestamp, subject_geomean: 0, grep_1000_mean_ms: 0 };
    const head = { ...base, grep_1000_mean_ms: 5, throughput_mb_per_sec: 10 };
    const report = compareBaselines(base, head, 10);
    const json = JSON.stringify(report);
    assert.doesNotMatch(json, /NaN|Infinity|null,"head":null,"change":0/);
    const grep = report.metrics.find((metric) => metric.field === 'grep_1000_mean_ms')!;
    assert.equal(grep.change_pct, null);
    assert.equal(grep.regression, true, '0 -> 5 ms is worse');
    const throughput = report.metrics.find((metric) => metric.field === 'throughput_mb_per_sec')!;
    assert.equal(throughput.status, 'missing');
    assert.equal(
      report.speedups.every((entry) => entry.base === null && entry.status === 'missing'),
      true,
    );
    assert.ok(report.warnings.some((warning) => warning.includes('subject_geomean is 0')));
    assert.equal(compareBaselines(base, base).regressed, false);
  });

  it('keeps every number finite for extreme figures: a change or speedup that cannot be computed is null', () => {
    const extremes = [0, 5e-324, 1e-320, 1e-3, 1, 1e308, Number.MAX_VALUE];
    for (const base of extremes) {
      for (const head of extremes) {
        const record = (value: number, other: number): BaselineRecord => ({
          ...valid,
          subject_geomean: value,
          alpha_geomean: other,
          beta_geomean: value,
          grep_1000_mean_ms: value,
          throughput_mb_per_sec: other,
          files_per_sec: value,
          total_runtime_sec: other,
        });
        const report = compareBaselines(record(base, head), record(head, base));
        assert.deepEqual(nonFinite(report), [], `${base} -> ${head}`);
        const subject = report.metrics.find((metric) => metric.field === 'subject_geomean')!;
        if (base !== 0 && base !== head && !Number.isFinite(((head - base) / base) * 100)) assert.equal(subject.change_pct, null, `${base} -> ${head}`);
      }
    }
  });

  it('warns when the corpus size changed', () => {
    const report = compareBaselines(valid, { ...valid, corpus_size: 2000 });
    assert.match(report.warnings[0]!, /corpus_size differs/);
  });

  it('renders a markdown table ready for a pull-request comment', () => {
    const markdown = formatReport(compareBaselines(valid, { ...valid, commit_sha: 'b2c3d4e', subject_geomean: 0.75 }), 'markdown');
    assert.match(markdown, /^### Benchmark comparison: `a1b2c3d` → `b2c3d4e`/);
    assert.match(markdown, /:x: REGRESSED beyond 10%: subject_geomean/);
    assert.match(markdown, /\| subject_geomean \(s\) \| 0\.5 \| 0\.75 \| \+50\.00% \| \*\*REGRESSION\*\* \|/);
  });
});

describe('history-aware regression detection', () => {
  // A run whose subject and tools all scale with `machine` (speedups unchanged) and whose subject alone scales with `ours`.
  const run = (sha: string, ours: number, machine = 1): Run => ({
    commit_sha: sha,
    record: {
      ...valid,
      commit_sha: sha,
      subject_geomean: 0.5 * ours * machine,
      alpha_geomean: 1.5 * machine,
      beta_geomean: 1.0 * machine,
      gamma_geomean: 2.0 * machine,
      grep_1000_mean_ms: 40 * machine,
    },
  });
  const field = (detection: ReturnType<typeof detectRegression>, name: string) => detection.fields.find((entry) => entry.field === name)!;
  // Ten earlier commits on a noisy runner: the machine factor wanders by about +-6 %, our own time by +-2 %.
  const jitter = [0, 0.02, -0.01, 0.01, -0.02, 0.01, 0, -0.01, 0.02, -0.02];
  const noisy = [1.0, 1.06, 0.95, 1.04, 0.97, 1.05, 0.94, 1.02, 0.99, 1.06].map((machine, index) => run(`n${index}00000`, 1 + jitter[index]!, machine));
  const steady = [1.0, 1.01, 0.99, 1.0, 1.01, 0.99, 1.0, 1.0, 1.01, 0.99].map((machine, index) => run(`s${index}00000`, 1, machine));

  it('a change beyond the threshold but inside the noise band is not a regression; the same change on a steady history is', () => {
    const onNoise = detectRegression(noisy, [run('head000', 1, 1.12)]);
    assert.equal(onNoise.method, 'z-score');
    const grep = field(onNoise, 'grep_1000_mean_ms');
    assert.ok(grep.change_pct! > 10, `${grep.change_pct}% beyond the threshold`);
    assert.equal(grep.regression, false, grep.reason);
    assert.match(grep.reason, /within the noise band/);
    assert.equal(onNoise.regressed, false);
    const onSteady = detectRegression(steady, [run('head000', 1, 1.12)]);
    assert.equal(field(onSteady, 'grep_1000_mean_ms').regression, true, field(onSteady, 'grep_1000_mean_ms').reason);
    assert.match(field(onSteady, 'grep_1000_mean_ms').reason, /z = \d+(\.\d+)? > 3: regression/);
    assert.equal(field(onSteady, 'speedup_vs_alpha').regression, false, 'a slower machine leaves the speedups alone');
  });

  it('a figure that never moved has no spread and no change, not the rounding of its sum (outside review)', () => {
    // Nine 94.1s summed are 94.1 plus rounding: read as a 1.5e-14 % change with z = -0.94.
    const same = (sha: string): Run => ({ commit_sha: sha, record: { ...valid, commit_sha: sha, total_runtime_sec: 94.1 } });
    const history = Array.from({ length: 9 }, (_, index) => same(`c${index}000000`));
    const total = field(detectRegression(history, [same('head000')]), 'total_runtime_sec');
    assert.deepEqual([total.centre, total.spread, total.change_pct, total.z], [94.1, 0, 0, 0]);
    assert.match(total.reason, /^the same as the mean of 9 earlier commits \(band 94\.1\.\.94\.1\), z = 0 <= 3/);
  });

  it('a real step of the subject is a regression even on the noisy runner: the speedups cancel the machine', () => {
    const detection = detectRegression(noisy, [run('head000', 1.3, 1.05)]);
    assert.deepEqual(
      detection.regressions.filter((name) => name.startsWith('speedup')),
      ['speedup_vs_alpha', 'speedup_vs_beta', 'speedup_vs_gamma'],
    );
    const alpha = field(detection, 'speedup_vs_alpha');
    assert.equal(alpha.runs_considered, 10);
    assert.ok(alpha.band![0] < alpha.centre! && alpha.centre! < alpha.band![1]);
  });

  it('with fewer than a handful of earlier commits the percentage threshold decides, and the report says so', () => {
    const detection = detectRegression(noisy.slice(0, 3), [run('head000', 1.2)]);
    assert.equal(detection.method, 'threshold');
    assert.match(detection.note!, /Only 3 earlier commits \(fewer than 5\)/);
    assert.equal(field(detection, 'subject_geomean').regression, true);
    assert.equal(detectRegression([], [run('head000', 2)]).method, 'none');
    assert.equal(detectRegression([], [run('head000', 2)]).regressed, false);
  });

  it('averages the runs of one commit: repeated runs count once in the history and sharpen the head', () => {
    const history = [...steady.slice(0, 4), run('rerun00', 1, 1.0), run('rerun00', 1, 1.3), run('rerun00', 1, 0.7)];
    const detection = detectRegression(history, [run('head000', 1, 1.0)]);
    assert.equal(field(detection, 'grep_1000_mean_ms').runs_considered, 5, 'three runs of one commit are one value');
    const headRuns = detectRegression(steady, [run('head000', 1, 1.2), run('head000', 1, 1.0)]);
    const grep = field(headRuns, 'grep_1000_mean_ms');
    assert.equal(grep.head_runs, 2);
    assert.equal(grep.head, 44, "the mean of the head commit's runs");
    // Runs of the head commit in the history are the head's, not its history.
    assert.equal(field(detectRegression([...steady, run('head000', 1, 5)], [run('head000', 1, 1)]), 'grep_1000_mean_ms').runs_considered, 10);
  });

  it('looks back over the newest ten commits that have the field, past commits without it', () => {
    const withoutThroughput = (sha: string): Run => ({ commit_sha: sha, record: { ...valid, commit_sha: sha, throughput_mb_per_sec: undefined } });
    const withThroughput = (sha: string, value: number): Run => ({ commit_sha: sha, record: { ...valid, commit_sha: sha, throughput_mb_per_sec: value } });
    // Twelve commits with the figure (the oldest two far off), then three without it.
    const history = [
      ...[100, 100, 300, 302, 298, 301, 299, 300, 301, 299, 300, 302].map((value, index) => withThroughput(`w${index}00000`, value)),
      ...[0, 1, 2].map((index) => withoutThroughput(`x${index}00000`)),
    ];
    const throughput = field(detectRegression(history, [withThroughput('head000', 300)]), 'throughput_mb_per_sec');
    assert.equal(throughput.runs_considered, 10);
    assert.equal(throughput.regression, false, 'the two far-off oldest commits are beyond the ten');
    assert.equal(field(detectRegression(history, [withThroughput('head000', 300)]), 'grep_1000_mean_ms').runs_considered, 10);
  });

  it('keeps every number finite for extreme figures, over a history too', () => {
    for (const value of [5e-324, 1e-320, 1e308, Number.MAX_VALUE]) {
      const runs: Run[] = [0, 1e-320, 1, value, 1e308, Number.MAX_VALUE, value].map((figure, index) => ({
        commit_sha: `c${index}00000`,
        record: {
          ...valid,
          commit_sha: `c${index}00000`,
          subject_geomean: figure,
          alpha_geomean: value,
          grep_1000_mean_ms: figure,
          throughput_mb_per_sec: Number.MAX_VALUE - figure,
        },
      }));
      for (let index = 1; index <= runs.length; index++) {
        const detection = detectRegression(runs.slice(0, index - 1), [runs[index - 1]!]);
        assert.deepEqual(nonFinite(detection), [], `${value}, run ${index}`);
        assert.doesNotMatch(JSON.stringify(detection), /NaN|Infinity/);
      }
    }
  });

  it('judges each direction: a throughput drop is worse, a rise is not', () => {
    const withThroughput = (sha: string, value: number): Run => ({ commit_sha: sha, record: { ...valid, commit_sha: sha, throughput_mb_per_sec: value } });
    const history = [300, 302, 298, 301, 299, 300].map((value, index) => withThroughput(`t${index}00000`, value));
    assert.equal(field(detectRegression(history, [withThroughput('head000', 240)]), 'throughput_mb_per_sec').regression, true);
    assert.equal(field(detectRegression(history, [withThroughput('head000', 360)]), 'throughput_mb_per_sec').regression, false);
    assert.equal(DEFAULT_DETECTION.lookback, 10);
  });
});

for (const dialect of DIALECTS) {
  describe(`baselines API (${dialect})`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect);
    });
    after(() => app.cleanup());

    it('stores a record exactly as sent and answers with a comparison against the previous one', async () => {
      const raw = '{"commit_sha":"a1b2c3d",  "timestamp":"2026-11-21T22:00:00.000Z","subject_geomean":0.50,"grep_1000_mean_ms":40.0, "alpha_geomean": 1.5}';
      const first = await app.api('POST', '/api/baselines', raw);
      assert.equal(first.status, 201);
      assert.equal(first.body.comparison, null);
      assert.equal(first.body.record.commit_sha, 'a1b2c3d');
      const row = await app.database.db.selectFrom('baselines').select('record').where('id', '=', first.body.id).executeTakeFirstOrThrow();
      assert.equal(row.record, raw, 'stored byte for byte');

      const second = await app.api('POST', '/api/baselines', { ...valid, commit_sha: 'b2c3d4e', subject_geomean: 0.6, alpha_geomean: 1.5 });
      assert.equal(second.status, 201);
      assert.equal(second.body.comparison.regressed, true);
      assert.deepEqual(second.body.comparison.regressions, ['subject_geomean', 'speedup_vs_alpha']);

      const events = (await app.api('GET', '/api/events')).body.events.filter((event: { event_type: string }) => event.event_type === 'baseline.recorded');
      assert.equal(events.length, 2);
      assert.equal(events[1].severity, 'warning');
      assert.equal(events[1].detail.commit_sha, 'b2c3d4e');
    });

    it('rejects an invalid record with one entry per violation and stores nothing', async () => {
      const before = (await app.api('GET', '/api/baselines')).body.length;
      const response = await app.api('POST', '/api/baselines', {
        commit_sha: 'xmain',
        subject_geomean: -2,
        timestamp: 'yesterday',
        grep_1000_mean_ms: 1,
        bogus: 1,
      });
      assert.equal(response.status, 400);
      assert.equal(response.body.code, 'validation_failed');
      assert.deepEqual(response.body.errors.map((error: { path: string }) => error.path).sort(), ['/bogus', '/commit_sha', '/subject_geomean', '/timestamp']);
      assert.equal((await app.api('POST', '/api/baselines', [valid])).status, 400);
      assert.equal((await app.api('GET', '/api/baselines')).body.length, before);
    });

    it('lists newest first, reads one, the latest, and compares by id, commit sha or latest', async () => {
      const third = await app.api('POST', '/api/baselines', { ...valid, commit_sha: 'c3d4e5f', subject_geomean: 0.4 });
      const list = (await app.api('GET', '/api/baselines?limit=2')).body;
      assert.deepEqual(
        list.map((entry: { record: BaselineRecord }) => entry.record.commit_sha),
        ['c3d4e5f', 'b2c3d4e'],
      );
      const older = (await app.api('GET', `/api/baselines?before=${list[1].id}`)).body;
      assert.deepEqual(
        older.map((entry: { record: BaselineRecord }) => entry.record.commit_sha),
        ['a1b2c3d'],
      );
      assert.equal((await app.api('GET', '/api/baselines/latest')).body.id, third.body.id);
      assert.equal((await app.api('GET', `/api/baselines/${list[1].id}`)).body.record.commit_sha, 'b2c3d4e');
      assert.equal((await app.api('GET', '/api/baselines/99999')).status, 404);

      const bySha = (await app.api('GET', `/api/baselines/compare?base=a1b2c3d&head=${third.body.id}`)).body;
      assert.equal(bySha.base.commit_sha, 'a1b2c3d');
      assert.equal(bySha.head.commit_sha, 'c3d4e5f');
      assert.equal(bySha.regressed, false);
      const strict = (await app.api('GET', `/api/baselines/compare?base=b2c3d4e&head=${third.body.id}&threshold=0`)).body;
      assert.equal(strict.threshold_pct, 0);
      const latest = (await app.api('GET', `/api/baselines/compare?base=latest&head=${list[1].id}`)).body;
      assert.equal(latest.base_id, third.body.id);
      assert.equal((await app.api('GET', '/api/baselines/compare?base=deadbee&head=1')).status, 404);
      assert.equal((await app.api('GET', '/api/baselines/compare?base=1')).status, 400);
    });

    it('serves the schema file', async () => {
      const response = await app.api('GET', '/schemas/baseline.schema.json', undefined, { authorization: '' });
      assert.equal(response.status, 200);
      assert.equal(response.body.$id, 'urn:mothership:schema:baseline:v1');
    });

    it('orders and compares runs by their timestamp: a backfilled older run never becomes latest', async () => {
      const post = async (sha: string, timestamp: string, subject: number) =>
        (await app.api('POST', '/api/baselines', { ...valid, commit_sha: sha, timestamp, subject_geomean: subject })).body;
      const a = await post('aaaaaaa', '2026-11-22T10:00:00Z', 0.5);
      const c = await post('ccccccc', '2026-11-22T14:00:00Z', 0.5);
      // Posted last, run in between (12:00 UTC, written with an offset).
      const b = await post('bbbbbbb', '2026-11-22T14:00:00+02:00', 0.6);
      assert.equal(b.comparison.base.commit_sha, 'aaaaaaa', 'a backfill is compared with the run before it in time');
      assert.equal(b.comparison.regressed, true);
      assert.equal((await app.api('GET', '/api/baselines/latest')).body.id, c.id, 'the newest run stays latest');
      const list = (await app.api('GET', '/api/baselines?limit=3')).body;
      assert.deepEqual(
        list.map((entry: { id: number }) => entry.id),
        [c.id, b.id, a.id],
      );
      const page = (await app.api('GET', `/api/baselines?limit=1&before=${b.id}`)).body;
      assert.deepEqual(
        page.map((entry: { id: number }) => entry.id),
        [a.id],
        'the cursor follows run order',
      );
      const d = await post('ddddddd', '2026-11-22T16:00:00Z', 0.5);
      assert.equal(d.comparison.base.commit_sha, 'ccccccc', 'the next run is compared with the newest, not the backfill');
      assert.equal(d.comparison.regressed, false);
      assert.equal((await app.api('GET', '/api/baselines?before=999999')).status, 404);
    });

    it('a run another instance recorded is in the history of the next push here', async () => {
      const post = async (sha: string, timestamp: string) => (await app.api('POST', '/api/baselines', { ...valid, commit_sha: sha, timestamp })).body;
      await post('e1e1e1e', '2026-11-23T10:00:00Z');
      // Written behind this process's back, as another instance on the same database would.
      const record = { ...valid, commit_sha: 'e2e2e2e', timestamp: '2026-11-23T11:00:00Z', subject_geomean: 0.25 };
      await app.database.write((db) =>
        db
          .insertInto('baselines')
          .values({ commit_sha: record.commit_sha, recorded_at: new Date().toISOString(), run_at: '2026-11-23T11:00:00.000Z', record: JSON.stringify(record) })
          .execute(),
      );
      const next = await post('e3e3e3e', '2026-11-23T12:00:00Z');
      assert.equal(next.comparison.base.commit_sha, 'e2e2e2e');
      assert.equal(next.comparison.regressed, true, 'against the other instance’s figures (0.25), not the run before it here (0.5)');
    });

    it('pushes sent at once each compare against the run stored just before them (outside attack: on PostgreSQL they did not see each other)', async () => {
      const timestamp = '2026-11-24T10:00:00Z';
      type Answer = { id: number; record: typeof valid; comparison: { base: { commit_sha: string }; metrics: { field: string; base: number }[] } };
      const anchor = (await app.api('POST', '/api/baselines', { ...valid, commit_sha: 'f0f0f0f', timestamp, subject_geomean: 0.9 })).body as Answer;
      const pushes = Array.from({ length: 8 }, (_, index) => ({
        ...valid,
        commit_sha: `f${index + 1}f${index + 1}f${index + 1}f`,
        timestamp,
        subject_geomean: 1 + index / 10,
      }));
      const answers = (await Promise.all(pushes.map((record) => app.api('POST', '/api/baselines', record)))).map((answer) => {
        assert.equal(answer.status, 201);
        return answer.body as Answer;
      });
      const inRunOrder = [anchor, ...answers.toSorted((a, b) => a.id - b.id)];
      const byCommit = new Map(inRunOrder.map((answer) => [answer.record.commit_sha, answer]));
      for (const [index, answer] of inRunOrder.entries()) {
        if (index === 0) continue;
        const base = byCommit.get(answer.comparison.base.commit_sha);
        // Same timestamps: run order is the order they were stored in.
        assert.equal(base?.id, inRunOrder[index - 1]!.id, `${answer.id} compared with the run just before it`);
        // The figures compared are that run's own.
        assert.equal(answer.comparison.metrics.find((metric) => metric.field === 'subject_geomean')!.base, base!.record.subject_geomean);
      }
    });

    it('judges a run against its history: noise on the runner raises no alarm, and the answer says why', async () => {
      const machine = [1.0, 1.06, 0.95, 1.04, 0.97, 1.05, 0.94, 1.02, 0.99, 0.96, 1.12];
      let last: any;
      for (const [index, factor] of machine.entries()) {
        last = (
          await app.api('POST', '/api/baselines', {
            ...valid,
            commit_sha: `f${String(index).padStart(2, '0')}0000`,
            timestamp: `2026-11-25T${String(index + 1).padStart(2, '0')}:00:00Z`,
            subject_geomean: 0.5 * factor,
            alpha_geomean: 1.5 * factor,
            beta_geomean: 1.0 * factor,
            gamma_geomean: 2.0 * factor,
            grep_1000_mean_ms: 40 * factor,
          })
        ).body;
      }
      // The last run is 17 % slower than the one before it on every time (the machine), 12 % slower than
      // the history's mean but inside its noise band: the plain comparison flags it, the history does not.
      assert.equal(last.comparison.regressed, true);
      assert.equal(last.detection.method, 'z-score');
      assert.equal(last.detection.regressed, false);
      const grep = last.detection.fields.find((field: { field: string }) => field.field === 'grep_1000_mean_ms');
      assert.equal(grep.runs_considered, 10);
      assert.match(grep.reason, /12\.\d+% worse than the mean of 10 earlier commits \(band .*within the noise band: not a regression/);
      const events = (await app.api('GET', '/api/events?type=baseline.recorded&order=desc&limit=1')).body.events;
      assert.deepEqual([events[0].severity, events[0].detail.regressed], ['info', false], 'the event follows the history-aware verdict');
      assert.deepEqual((await app.api('GET', `/api/baselines/${last.id}/detection`)).body, last.detection);
      const listed = (await app.api('GET', '/api/baselines?limit=3&detection=true')).body;
      assert.equal(listed.length, 3);
      assert.deepEqual(listed[0].detection, last.detection);
      assert.equal((await app.api('GET', '/api/baselines?limit=1')).body[0].detection, undefined, 'only when asked');
      assert.equal((await app.api('GET', '/api/baselines/999999/detection')).status, 404);
    });

    it('extreme but valid figures never fail the answer once the record is stored: each run is recorded once, with a 201', async () => {
      const figures = [1e-320, 1e308, 0, 5e-324, Number.MAX_VALUE, 1e-320, 1e308];
      const before = (await app.api('GET', '/api/baselines?limit=500')).body.length;
      const ids: number[] = [];
      for (const [index, figure] of figures.entries()) {
        const record = {
          ...valid,
          commit_sha: `e${index}00000`,
          timestamp: `2026-11-26T0${index + 1}:00:00Z`,
          subject_geomean: figure,
          alpha_geomean: 1.5,
          grep_1000_mean_ms: figure,
          throughput_mb_per_sec: figure,
          total_runtime_sec: Number.MAX_VALUE,
          corpus_size: Number.MAX_SAFE_INTEGER,
          notes: 'x'.repeat(TEXT_LIMITS.notes), // the longest notes (docs/api.md, Limits)
        };
        const response = await app.api('POST', '/api/baselines', record);
        assert.equal(response.status, 201, `${figure}: ${JSON.stringify(response.body).slice(0, 300)}`);
        ids.push(response.body.id);
        if (figures[index - 1] === 1e-320 && figure === 1e308) {
          const subject = response.body.comparison.metrics.find((metric: { field: string }) => metric.field === 'subject_geomean');
          assert.equal(subject.change_pct, null, 'from 1e-320 to 1e308: no finite percentage');
        }
      }
      assert.equal((await app.api('GET', '/api/baselines?limit=500')).body.length, before + figures.length, 'each run stored once');
      for (const [base, head] of [
        [ids[0], ids[1]],
        [ids[1], ids[0]],
        [ids[2], ids[4]],
        [ids[3], ids[4]],
      ]) {
        const comparison = await app.api('GET', `/api/baselines/compare?base=${base}&head=${head}`);
        assert.equal(comparison.status, 200, JSON.stringify(comparison.body));
      }
      const listed = await app.api('GET', `/api/baselines?limit=${figures.length}&detection=true`);
      assert.equal(listed.status, 200, JSON.stringify(listed.body).slice(0, 300));
      assert.equal((await app.api('GET', `/api/baselines/${ids.at(-1)}/detection`)).status, 200);
    });
  });

  describe(`baselines API, one commit only (${dialect})`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect);
    });
    after(() => app.cleanup());

    it('a history of one commit (every run pushed as main) is the 100 runs before, in the chart as in each run', async () => {
      for (let minute = 0; minute < 103; minute++) {
        const timestamp = new Date(Date.UTC(2025, 0, 1) + minute * 60_000).toISOString();
        assert.equal((await app.api('POST', '/api/baselines', { ...valid, commit_sha: 'main', timestamp })).status, 201);
      }
      const listed = (await app.api('GET', '/api/baselines?limit=3&detection=true')).body as { id: number; detection: Detection }[];
      for (const run of listed) assert.deepEqual(run.detection, (await app.api('GET', `/api/baselines/${run.id}/detection`)).body);
      assert.equal(listed[0]!.detection.method, 'none');
      assert.equal(listed[0]!.detection.fields[0]!.head_runs, 101);
    });
  });

  describe(`baselines API, commits and clocks (${dialect})`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect);
    });
    after(() => app.cleanup());
    const at = (minute: number) => new Date(Date.UTC(2023, 0, 1) + minute * 60_000).toISOString();
    const push = async (commit: string, minute: number, subject: number) => {
      const answer = await app.api('POST', '/api/baselines', { ...valid, commit_sha: commit, timestamp: at(minute), subject_geomean: subject });
      assert.equal(answer.status, 201, JSON.stringify(answer.body));
      return answer.body as { id: number; detection: Detection };
    };

    it('a run has one verdict, whichever page or request reads it (outside review: the chart said fine, the push failed)', async () => {
      // One commit re-run 291 times (slower at first), nine more commits, then the head: its 100 runs
      // before hold ten other commits, so its history ends there, however many runs a page read.
      const runs: [string, number][] = [
        ...Array.from({ length: 200 }, (): [string, number] => ['aaaaaaa', 2]),
        ...Array.from({ length: 91 }, (): [string, number] => ['aaaaaaa', 1]),
        ...Array.from({ length: 9 }, (_, index): [string, number] => [`b${index}b${index}b${index}b`, 1]),
      ];
      for (let start = 0; start < runs.length; start += 50) {
        await Promise.all(runs.slice(start, start + 50).map(([commit, subject], index) => push(commit, start + index, subject)));
      }
      const head = await push('beefbee', runs.length, 1.2);
      assert.equal(head.detection.regressed, true, JSON.stringify(head.detection.fields[0]));
      assert.deepEqual((await app.api('GET', `/api/baselines/${head.id}/detection`)).body, head.detection);
      for (const limit of [1, 10, 200, 500]) {
        const [newest] = (await app.api('GET', `/api/baselines?limit=${limit}&detection=true`)).body as { id: number; detection: Detection }[];
        assert.equal(newest!.id, head.id);
        assert.deepEqual(newest!.detection, head.detection, `a page of ${limit}`);
      }
    });

    it('a sha in either case is one commit: its runs are the head, never its history (outside review)', async () => {
      for (let index = 0; index < 10; index++) await push(`c${index}c${index}c${index}c`, 1000 + index, index % 2 ? 0.99 : 1.01);
      const first = await push('2bcdef9', 1010, 1.5);
      assert.equal(first.detection.regressed, true);
      const again = await push('2BCDEF9', 1011, 1.5);
      assert.equal(again.detection.regressed, true, 'the lower-case run is not its history');
      assert.equal(again.detection.fields[0]!.head_runs, 2);
      assert.equal(again.detection.runs_considered, 10);
      const byCommit = await app.api('GET', '/api/baselines/compare?base=C0C0C0C&head=2bcdef9');
      assert.equal(byCommit.status, 200, JSON.stringify(byCommit.body));
      assert.equal(byCommit.body.head_id, again.id, 'the newest run of the commit, in either case');
    });

    it("refuses a run stamped more than an hour ahead of the server's clock, which would stay latest until then (outside review)", async () => {
      const latest = (await app.api('GET', '/api/baselines/latest')).body.id;
      const ahead = new Date(Date.now() + 2 * 3_600_000).toISOString();
      const refused = await app.api('POST', '/api/baselines', { ...valid, timestamp: ahead });
      assert.equal(refused.status, 400);
      assert.equal(refused.body.errors[0].path, '/timestamp');
      assert.match(refused.body.errors[0].message, /at most 60 minutes ahead of the server's clock, which reads 20\d\d-/);
      assert.equal((await app.api('GET', '/api/baselines/latest')).body.id, latest, 'nothing stored');
      const fast = await app.api('POST', '/api/baselines', { ...valid, timestamp: new Date(Date.now() + 50 * 60_000).toISOString() });
      assert.equal(fast.status, 201, 'a runner whose clock is a little fast');
    });
  });

  // A service of its own: its earliest runs must be one commit's.
  describe(`baselines API, a history that starts with one commit (${dialect})`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect);
    });
    after(() => app.cleanup());

    it('a page whose first runs want older ones of their own commit still reads them for the others (outside review)', async () => {
      // A team that pushed `cccccccc` 400 times (faster at first), then switched to another commit.
      const runs: [string, number][] = [
        ...Array.from({ length: 200 }, (): [string, number] => ['cccccccc', 1]),
        ...Array.from({ length: 200 }, (): [string, number] => ['cccccccc', 2]),
        ...Array.from({ length: 50 }, (): [string, number] => ['dddddddd', 1.9]),
      ];
      const at = (minute: number) => new Date(Date.UTC(2022, 0, 1) + minute * 60_000).toISOString();
      for (let start = 0; start < runs.length; start += 50) {
        const answers = await Promise.all(
          runs
            .slice(start, start + 50)
            .map(([commit, subject], index) =>
              app.api('POST', '/api/baselines', { ...valid, commit_sha: commit, timestamp: at(start + index), subject_geomean: subject }),
            ),
        );
        for (const answer of answers) assert.equal(answer.status, 201, JSON.stringify(answer.body));
      }
      // The newest run's verdict on its own (as its push answered it), then in every page.
      const { id } = (await app.api('GET', '/api/baselines/latest')).body as { id: number };
      const detection = (await app.api('GET', `/api/baselines/${id}/detection`)).body as Detection;
      assert.equal(detection.fields[0]!.centre, 1.5, 'cccccccc as the mean of its 400 runs');
      for (const limit of [1, 50, 200, 500]) {
        const [newest] = (await app.api('GET', `/api/baselines?limit=${limit}&detection=true`)).body as { id: number; detection: Detection }[];
        assert.equal(newest!.id, id);
        assert.deepEqual(newest!.detection, detection, `a page of ${limit}`);
      }
    });
  });

  // A service of its own: it stores more runs than the other tests' lists read.
  describe(`baselines API, a long history (${dialect})`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect);
    });
    after(() => app.cleanup());

    it('a commit re-run more often than the history holds runs keeps its earlier commits, and so does the next (outside attack)', async () => {
      const at = (minute: number) => new Date(Date.UTC(2025, 5, 1) + minute * 60_000).toISOString();
      const push = async (commit: string, minute: number, subject: number) => {
        const answer = await app.api('POST', '/api/baselines', { ...valid, commit_sha: commit, timestamp: at(minute), subject_geomean: subject });
        assert.equal(answer.status, 201, JSON.stringify(answer.body));
        return answer.body as { id: number; detection: Detection };
      };
      const subjectOf = (detection: Detection) => detection.fields.find((field) => field.field === 'subject_geomean')!;
      // Twelve commits on a noisy runner, then one commit twice as slow, run every night 120 times.
      for (let index = 0; index < 12; index++) await push(`a${String(index).padStart(6, '0')}`, index, index % 2 ? 0.95 : 1.05);
      let last = { id: 0, detection: null as unknown as Detection };
      for (let night = 0; night < 120; night++) last = await push('b000000', 100 + night, 2);
      assert.equal(last.detection.method, 'z-score', 'the 120th run still has a history');
      assert.equal(last.detection.runs_considered, 10);
      assert.equal(last.detection.regressed, true);
      assert.equal(subjectOf(last.detection).head_runs, 120);
      // The next commit is judged against ten commits (that one and nine before it), not that one alone.
      const next = await push('c000000', 300, 1);
      assert.equal(next.detection.runs_considered, 10);
      assert.equal(subjectOf(next.detection).centre, 1.095);
      // The chart and each run's own verdict agree, for runs whose history reaches back past 100 runs.
      const listed = (await app.api('GET', '/api/baselines?limit=3&detection=true')).body as { id: number; detection: Detection }[];
      for (const run of listed) assert.deepEqual(run.detection, (await app.api('GET', `/api/baselines/${run.id}/detection`)).body);
      assert.deepEqual(listed[1]!.detection, last.detection);
      assert.deepEqual(listed[0]!.detection, next.detection);
    });

    it('a backfilled push is answered once more runs are stored than the process keeps parsed (outside attack: a 500)', async () => {
      const at = (minute: number) => new Date(Date.UTC(2024, 0, 1) + minute * 60_000).toISOString();
      // More runs than the 1,000 parsed records a process keeps, pushed in order of their timestamps.
      for (let start = 1; start <= 1100; start += 100) {
        const pushes = Array.from({ length: 100 }, (_, index) => start + index).map((minute) =>
          app.api('POST', '/api/baselines', { ...valid, commit_sha: `d${String(minute).padStart(6, '0')}`, timestamp: at(minute) }),
        );
        for (const answer of await Promise.all(pushes)) assert.equal(answer.status, 201);
      }
      // Between runs 150 and 151: its history reaches runs no longer kept and the oldest still kept,
      // which reading the first must not push out before they are used.
      const backfilled = await app.api('POST', '/api/baselines', {
        ...valid,
        commit_sha: 'dbacf00',
        timestamp: new Date(Date.parse(at(150)) + 30_000).toISOString(),
      });
      assert.equal(backfilled.status, 201, JSON.stringify(backfilled.body));
      assert.equal(backfilled.body.comparison.base.commit_sha, 'd000150');
      assert.equal(backfilled.body.detection.fields[0].head_runs, 1);
    });
  });
}

describe('baseline CLI', () => {
  const run = promisify(execFile);
  const dir = mkdtempSync(path.join(tmpdir(), 'mothership-cli-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, content: unknown) => {
    const target = path.join(dir, name);
    writeFileSync(target, typeof content === 'string' ? content : JSON.stringify(content));
    return target;
  };
  const cli = async (...args: string[]) => {
    try {
      const { stdout, stderr } = await run(process.execPath, [MAIN, 'baseline', ...args]);
      return { code: 0, stdout, stderr };
    } catch (error) {
      const failure = error as { code: number; stdout: string; stderr: string };
      return { code: failure.code, stdout: failure.stdout, stderr: failure.stderr };
    }
  };

  it('validate: exit 0 for valid files, 1 with file, pointer and reason for each error', async () => {
    const good = file('good.json', valid);
    const bad = file('bad.json', { ...valid, commit_sha: 'xyz', corpus_size: -1 });
    assert.equal((await cli('validate', good)).code, 0);
    // Saved by a Windows editor with a byte order mark: the API takes it, so does the CLI.
    assert.equal((await cli('validate', file('bom.json', `\ufeff${JSON.stringify(valid)}`))).code, 0);
    const result = await cli('validate', good, bad, file('broken.json', '{'));
    assert.equal(result.code, 1);
    assert.match(result.stderr, /bad\.json: \/commit_sha: must match pattern/);
    assert.match(result.stderr, /bad\.json: \/corpus_size: must be >= 0/);
    assert.match(result.stderr, /broken\.json: not valid JSON/);
    assert.equal((await cli('validate')).code, 2);
    // A run the server would refuse for its time, refused here first (outside review: "valid", then a 400).
    const ahead = await cli('validate', file('ahead.json', { ...valid, timestamp: '2099-06-01T00:00:00Z' }));
    assert.equal(ahead.code, 1);
    assert.match(ahead.stderr, /ahead\.json: \/timestamp: must be at most 60 minutes ahead of this machine's clock, which reads 20\d\d-/);
    // What is not a record file is named as such, and read no further (outside review: /dev/zero grew to
    // gigabytes, a directory was "not valid JSON"); a pipe is read as a file is.
    const big = file('big.json', JSON.stringify(valid) + ' '.repeat(BASELINE_RECORD_LIMIT));
    const odd = await cli('validate', '/dev/zero', dir, big);
    assert.equal(odd.code, 1, odd.stderr);
    assert.match(odd.stderr, /^\/dev\/zero: larger than a record may be \(131072 bytes\)$/m);
    assert.match(odd.stderr, /mothership-cli-\w+: a directory, not a record file$/m);
    assert.match(odd.stderr, /big\.json: larger than a record may be \(131072 bytes\)$/m);
    // Through a shell's pipe (Node's own stdin pipes are sockets, which /dev/stdin cannot open).
    const piped = execFileSync('sh', ['-c', 'cat "$1" | "$2" "$3" baseline validate /dev/stdin', 'sh', good, process.execPath, MAIN], { encoding: 'utf8' });
    assert.equal(piped.trim(), '/dev/stdin: valid');
  });

  it('compare: exit 1 on a regression beyond the threshold, 0 otherwise, in every format', async () => {
    const base = file('base.json', valid);
    const head = file('head.json', { ...valid, commit_sha: 'b2c3d4e', subject_geomean: 0.53, alpha_geomean: 1.59 });
    const within = await cli('compare', base, head);
    assert.equal(within.code, 0, within.stderr);
    assert.match(within.stdout, /No regression beyond 10%/);
    const strict = await cli('compare', base, head, '--threshold', '5');
    assert.equal(strict.code, 1);
    assert.match(strict.stdout, /REGRESSED beyond 5%: subject_geomean/);
    const json = await cli('compare', base, head, '--format=json', '--threshold=5');
    assert.equal(JSON.parse(json.stdout).regressed, true);
    const markdown = await cli('compare', base, head, '--format', 'markdown');
    assert.match(markdown.stdout, /^### Benchmark comparison/);
    assert.equal((await cli('compare', base, head, '--format', 'xml')).code, 2);
    assert.equal((await cli('compare', base)).code, 2);
    assert.equal((await cli('compare', base, file('invalid.json', { nope: 1 }))).code, 2);
  });

  describe('against a live server', () => {
    let app: TestApp;
    let server: string;
    const env = (extra: Record<string, string> = {}) => ({ PATH: process.env.PATH!, MOTHERSHIP_TOKEN: ADMIN_TOKEN, ...extra });
    const cliWith = async (environment: Record<string, string>, ...args: string[]) => {
      try {
        const { stdout, stderr } = await run(process.execPath, [MAIN, 'baseline', ...args], { env: environment });
        return { code: 0, stdout, stderr };
      } catch (error) {
        const failure = error as { code: number; stdout: string; stderr: string };
        return { code: failure.code, stdout: failure.stdout, stderr: failure.stderr };
      }
    };
    before(async () => {
      app = await startTestApp('sqlite');
      server = await app.http.listen({ port: 0, host: '127.0.0.1' });
    });
    after(() => app.cleanup());

    it('push records runs and gates on the comparison: 0 first and within the threshold, 1 on a regression, with a GitHub step summary', async () => {
      const summary = path.join(dir, 'summary.md');
      const first = await cliWith(
        env({ GITHUB_STEP_SUMMARY: summary }),
        'push',
        file('run1.json', { ...valid, timestamp: '2026-11-22T10:00:00Z' }),
        '--server',
        server,
      );
      assert.deepEqual([first.code, first.stderr], [0, '']);
      assert.match(first.stdout, /first run, nothing to compare with/);
      const firstSummary = readFileSync(summary, 'utf8');
      assert.match(firstSummary, /^### Benchmark baseline `a1b2c3d`: recorded, the first run\n/, 'the first push says so');
      assert.match(firstSummary, /no earlier run on this server: nothing to compare with/);
      assert.match(firstSummary, /^\| subject_geomean \| 0\.5 s \|$/m, 'and shows its values');
      assert.match(firstSummary, /^\| grep_1000_mean_ms \| 40 ms \|$/m);
      const within = await cliWith(
        env({ GITHUB_STEP_SUMMARY: summary }),
        'push',
        file('run2.json', { ...valid, commit_sha: 'b2c3d4e', timestamp: '2026-11-23T10:00:00Z', subject_geomean: 0.52, alpha_geomean: 1.56 }),
        '--server',
        server + '/',
      );
      assert.equal(within.code, 0, within.stderr);
      assert.match(within.stdout, /No regression beyond 10%/);
      const quiet = readFileSync(summary, 'utf8').slice(firstSummary.length);
      assert.match(quiet, /^### Benchmark baseline `b2c3d4e`: :white_check_mark: no regression\n/);
      assert.match(quiet, /^All 11 metrics within ±10% of the previous run\.$/m, 'a quiet run is one line, not a line per metric');
      assert.doesNotMatch(quiet, /within threshold|\| subject_geomean/);
      const regressed = await cliWith(
        env({ GITHUB_STEP_SUMMARY: summary }),
        'push',
        file('run3.json', { ...valid, commit_sha: 'c3d4e5f', timestamp: '2026-11-24T10:00:00Z', subject_geomean: 0.7, alpha_geomean: 1.2 }),
        '--server',
        server,
        '--format',
        'json',
      );
      assert.equal(regressed.code, 1, regressed.stderr);
      const output = JSON.parse(regressed.stdout);
      assert.equal(output.comparison.regressions.includes('subject_geomean'), true);
      assert.equal(output.detection.method, 'threshold', 'two earlier commits: the threshold decides, and says so');
      assert.equal(output.detection.regressions.includes('subject_geomean'), true);
      const written = readFileSync(summary, 'utf8');
      assert.equal(written.match(/^### Benchmark baseline /gm)?.length, 3, 'one summary per push, appended, whatever --format prints');
      const loud = written.slice(written.lastIndexOf('### Benchmark baseline'));
      assert.match(loud, /^### Benchmark baseline `c3d4e5f`: :x: regressed\n/);
      assert.match(loud, /\*\*Against the history\*\* \(the mean of 2 earlier commits, threshold 10% alone\):\n\n- \*\*subject_geomean\*\*: /);
      assert.match(loud, /Against the previous run `b2c3d4e`/);
      // Only what changed beyond the threshold, regressions first, then improvements.
      const rows = loud.split('\n').filter((line) => line.startsWith('| ') && !/^\| (changed|---)/.test(line));
      assert.deepEqual(
        rows.map((line) => line.split(' | ')[0]!.slice(2)),
        ['subject_geomean (s)', 'speedup vs alpha (x)', 'speedup vs beta (x)', 'speedup vs gamma (x)', 'alpha_geomean (s) [ref]'],
      );
      assert.match(rows[0]!, /\| 0\.52 \| 0\.7 \| \+34\.62% \| \*\*REGRESSION\*\* \|$/);
      assert.match(rows.at(-1)!, /\| 1\.56 \| 1\.2 \| -23\.08% \| improved \|$/);
      assert.match(loud, /^6 other metrics within ±10% of the previous run\.$/m);
      assert.equal((await app.api('GET', '/api/baselines')).body.length, 3);
    });

    it('push writes the step summary for a failure too: the problem, its fields, what to do', async () => {
      const summary = path.join(dir, 'failures.md');
      const runFile = file('run-failing.json', { ...valid, commit_sha: 'f0f0f0f' });
      // A server that fails, as a crashed handler would: 500 with a problem+json body.
      const broken = createServer((request, response) => {
        request.resume();
        response.writeHead(500, { 'content-type': 'application/problem+json' });
        response.end(JSON.stringify({ type: 'about:blank', title: 'Internal Server Error', status: 500, detail: 'the database is not reachable' }));
      });
      await new Promise<void>((resolve) => broken.listen(0, '127.0.0.1', resolve));
      const brokenUrl = `http://127.0.0.1:${(broken.address() as AddressInfo).port}`;
      // A server (or proxy) that takes the whole request and drops the connection before answering.
      const dropping = createServer((request) => request.resume().on('end', () => request.socket.destroy()));
      await new Promise<void>((resolve) => dropping.listen(0, '127.0.0.1', resolve));
      const droppingUrl = `http://127.0.0.1:${(dropping.address() as AddressInfo).port}`;
      const closedPort = await freePort();
      // A server whose answer breaks off after its status line, with each status (the path says which).
      const cutting = createServer((request, response) => {
        request.resume();
        response.writeHead(Number(request.url!.split('/')[1]), { 'content-type': 'application/json', 'content-length': '100' });
        response.write('{"id"', () => response.socket?.destroy());
      });
      await new Promise<void>((resolve) => cutting.listen(0, '127.0.0.1', resolve));
      const cutUrl = (status: number) => `http://127.0.0.1:${(cutting.address() as AddressInfo).port}/${status}`;
      const cases: [Record<string, string>, string[], RegExp[]][] = [
        [
          env(),
          ['push', file('bad-summary.json', { ...valid, commit_sha: 'nope', corpus_size: -1 }), '--server', server],
          [
            /^### Benchmark baseline: :x: push failed\n/,
            /\*\*Not a valid baseline record\*\*: .*bad-summary\.json$/m,
            /^- .*bad-summary\.json: \/commit_sha: must match pattern/m,
            /^- .*: \/corpus_size: must be \\>= 0$/m,
            /Nothing was sent/,
          ],
        ],
        [
          env({ MOTHERSHIP_TOKEN: 'wrong-token-wrong-token' }),
          ['push', runFile, '--server', server],
          [
            /^### Benchmark baseline `f0f0f0f`: :x: push failed\n/,
            /\*\*Unauthorized \(401\)\*\*: /,
            /\*\*What to do\*\*: MOTHERSHIP_TOKEN must hold a valid token: store an API token of scope ci/,
          ],
        ],
        [
          env(),
          ['push', runFile, '--server', brokenUrl],
          [/\*\*Internal Server Error \(500\)\*\*: the database is not reachable/, /the server failed: re-run the job/],
        ],
        [env({ MOTHERSHIP_TOKEN: '' }), ['push', runFile, '--server', server], [/\*\*The push step is not set up\*\*: MOTHERSHIP_TOKEN is not set/]],
        [
          env(),
          ['push', runFile, '--server', `http://127.0.0.1:${closedPort}`],
          [/\*\*Server not reached\*\*: could not reach .*ECONNREFUSED/, /Nothing was recorded/],
        ],
        [
          // The request went out: whether it was recorded is for the history to say (outside review: "Nothing was recorded").
          env(),
          ['push', runFile, '--server', droppingUrl],
          [/\*\*The answer was lost\*\*: no answer from http:\/\/127\.0\.0\.1:\d+/, /may have been recorded .*`mothership baseline history`/],
        ],
        [
          // Its status came, then the connection broke: a refusal recorded nothing, a success did.
          env(),
          ['push', runFile, '--server', cutUrl(400)],
          [/\*\*Refused \(400\)\*\*: .*answered 400, then its answer broke off/, /Nothing was recorded/],
        ],
        [
          env(),
          ['push', runFile, '--server', cutUrl(201)],
          [/\*\*The answer was lost\*\*: .*answered 201, then its answer broke off/, /may have been recorded/],
        ],
        [
          // The record file is the benchmark's (a pull request's code): a field name it invents is echoed in the problems.
          env(),
          [
            'push',
            file('crafted-summary.json', { ...valid, ['x|y\n\n### :white_check_mark: all good <img src=x onerror=alert(1)> `z']: 1 }),
            '--server',
            server,
          ],
          [/^- .*: \/x\\\|y {2}\\#\\#\\# :white_check_mark: all good \\<img src=x onerror=alert\(1\)\\> \\`z: is not an allowed property$/m],
        ],
      ];
      try {
        for (const [environment, args, expected] of cases) {
          writeFileSync(summary, '');
          const result = await cliWith({ ...environment, GITHUB_STEP_SUMMARY: summary }, ...args);
          assert.equal(result.code, 2, `${args.join(' ')}: ${result.stdout}${result.stderr}`);
          const written = readFileSync(summary, 'utf8');
          for (const pattern of expected) assert.match(written, pattern, `${args.join(' ')}:\n${written}`);
          assert.equal(written.match(/^#/gm)?.length, 1, `one heading, the summary's own:\n${written}`);
          assert.doesNotMatch(written, /(?<!\\)<img/, 'no HTML from what was pushed');
          if (/may have been recorded/.test(written)) assert.doesNotMatch(written, /Nothing was recorded/);
        }
      } finally {
        broken.close();
        dropping.close();
        cutting.close();
      }
    });

    it('push and history exit 2 with a reason on every error, and record nothing', async () => {
      const runFile = file('run-errors.json', valid);
      const closedPort = await freePort();
      const cases: [Record<string, string>, string[], RegExp][] = [
        [env(), ['push', file('bad-run.json', { ...valid, commit_sha: 'nope' }), '--server', server], /\/commit_sha: must match pattern/],
        [env({ MOTHERSHIP_TOKEN: '' }), ['push', runFile, '--server', server], /MOTHERSHIP_TOKEN is not set/],
        [env({ MOTHERSHIP_TOKEN: 'wrong-token-wrong-token' }), ['push', runFile, '--server', server], /refused the request \(401\)/],
        [env(), ['push', runFile], /--server URL is required/],
        [env(), ['push', runFile, '--server', 'ftp://x'], /must be an http/],
        [env(), ['push', runFile, '--server', `http://127.0.0.1:${closedPort}`], /could not reach http:\/\/127\.0\.0\.1:\d+: ECONNREFUSED/],
        [env(), ['push', runFile, '--server', server, '--bogus'], /Unknown option '--bogus'/],
        [env(), ['history', '--server', server, '--limit', '0'], /--limit must be 1\.\.500/],
        // An unset variable in a CI script, and forms Number() reads that the API refuses (outside review).
        ...['', ' ', '0x10', '-1', 'Infinity', '20000'].map((threshold): [Record<string, string>, string[], RegExp] => [
          env(),
          ['push', runFile, '--server', server, `--threshold=${threshold}`],
          /--threshold must be a decimal number from 0 to 10000/,
        ]),
      ];
      const before = (await app.api('GET', '/api/baselines')).body.length;
      for (const [environment, args, reason] of cases) {
        const result = await cliWith(environment, ...args);
        assert.equal(result.code, 2, `${args.join(' ')}: ${result.stdout}${result.stderr}`);
        assert.match(result.stderr, reason, args.join(' '));
      }
      assert.equal((await app.api('GET', '/api/baselines')).body.length, before);
    });

    it('history lists the newest runs in run order', async () => {
      const table = await cliWith(env(), 'history', '--server', server, '--limit', '2');
      assert.equal(table.code, 0, table.stderr);
      const rows = table.stdout.trim().split('\n').slice(2);
      assert.deepEqual(
        rows.map((row) => row.split(/\s+/)[2]),
        ['c3d4e5f', 'b2c3d4e'],
      );
      const json = JSON.parse((await cliWith(env(), 'history', '--server', server, '--format', 'json')).stdout);
      assert.deepEqual(
        json.map((entry: { record: BaselineRecord }) => entry.record.commit_sha),
        ['c3d4e5f', 'b2c3d4e', 'a1b2c3d'],
      );
    });

    it('the shell CI example in docs/baselines.md runs as written, with a ci token', async () => {
      const ciToken = (await app.api('POST', '/api/tokens', { name: 'CI job', scope: 'ci' })).body.token as string;
      const docs = readFileSync(new URL('../../docs/baselines.md', import.meta.url), 'utf8');
      const example = /<!-- ci-example:shell -->\n```sh\n([\s\S]*?)```/.exec(docs)?.[1];
      assert.ok(example, 'the example block is marked');
      const baselineFile = file('ci-run.json', { ...valid, commit_sha: 'd4e5f60', timestamp: '2026-11-25T10:00:00Z', subject_geomean: 0.51 });
      const ok = await run('bash', ['-c', example!], {
        env: env({ MOTHERSHIP_SERVER: server, MOTHERSHIP_TOKEN: ciToken, BASELINE_FILE: baselineFile, npm_config_offline: 'true' }),
      });
      assert.match(ok.stdout, /No regression beyond 10%/);
      assert.match(ok.stdout, /d4e5f60/);
      assert.doesNotMatch(ok.stderr, /Ignored environment variables/, 'the example uses only variables the CLI reads');
      const regressedFile = file('ci-run-bad.json', { ...valid, commit_sha: 'e5f6071', timestamp: '2026-11-26T10:00:00Z', subject_geomean: 0.9 });
      const failed = await run('bash', ['-c', example!], {
        env: env({ MOTHERSHIP_SERVER: server, MOTHERSHIP_TOKEN: ciToken, BASELINE_FILE: regressedFile, npm_config_offline: 'true' }),
      }).then(
        () => null,
        (error: { code: number; stdout: string }) => error,
      );
      assert.equal(failed?.code, 1, 'the job fails on a regression');
      assert.match(failed!.stdout, /REGRESSED/);
    });

    it('push in GitHub Actions adds the commit page to a record without commit_url', async () => {
      const actions = { GITHUB_SERVER_URL: 'https://github.com', GITHUB_REPOSITORY: 'org/bench' };
      const pushed = await cliWith(
        env(actions),
        'push',
        file('run-gh.json', { ...valid, commit_sha: '0a0b0c0', timestamp: '2026-11-27T10:00:00Z' }),
        '--server',
        server,
        '--format',
        'json',
      );
      assert.equal(pushed.code, 0, pushed.stderr);
      const own = { ...valid, commit_sha: '0a0b0c1', timestamp: '2026-11-27T11:00:00Z', commit_url: 'https://git.example/c/0a0b0c1' };
      assert.equal((await cliWith(env(actions), 'push', file('run-own.json', own), '--server', server)).code, 0);
      const stored = (await app.api('GET', '/api/baselines?limit=200')).body as { record: BaselineRecord }[];
      const url = (sha: string) => stored.find((run) => run.record.commit_sha === sha)?.record.commit_url;
      assert.equal(url('0a0b0c0'), 'https://github.com/org/bench/commit/0a0b0c0');
      assert.equal(url('0a0b0c1'), 'https://git.example/c/0a0b0c1', 'a commit_url of its own is kept');
    });

    it('push in GitHub Actions to a server older than commit_url (0.2.0 refuses the field) sends the record as written', async () => {
      const bodies: Record<string, unknown>[] = [];
      const older = createServer((request, response) => {
        let text = '';
        request.on('data', (chunk) => (text += chunk));
        request.on('end', () => {
          const body = JSON.parse(text) as Record<string, unknown>;
          bodies.push(body);
          if ('commit_url' in body) {
            response.writeHead(400, { 'content-type': 'application/problem+json' });
            response.end(
              JSON.stringify({
                title: 'Bad Request',
                status: 400,
                detail: 'must NOT have additional properties',
                errors: [{ path: '/commit_url', message: 'must NOT have additional properties' }],
              }),
            );
            return;
          }
          response.writeHead(201, { 'content-type': 'application/json' });
          response.end(JSON.stringify({ id: 7, comparison: null, detection: { regressed: false, fields: [] } }));
        });
      });
      await new Promise<void>((resolve) => older.listen(0, '127.0.0.1', resolve));
      try {
        const port = (older.address() as { port: number }).port;
        const actions = { GITHUB_SERVER_URL: 'https://github.com', GITHUB_REPOSITORY: 'org/bench' };
        const pushed = await cliWith(env(actions), 'push', file('run-old-server.json', valid), '--server', `http://127.0.0.1:${port}`, '--format', 'json');
        assert.equal(pushed.code, 0, pushed.stdout + pushed.stderr);
        assert.equal(bodies.length, 2, 'one retry without the field');
        assert.ok('commit_url' in bodies[0]! && !('commit_url' in bodies[1]!));
      } finally {
        older.close();
      }
    });

    it('push sends any threshold it accepts as the decimal text the server takes (outside review: 1e-7 was refused)', async () => {
      for (const threshold of ['0.0000001', '1e-7', '2.5', '10000']) {
        const pushed = await cliWith(
          env(),
          'push',
          file('tiny-threshold.json', { ...valid, timestamp: '2026-11-27T10:00:00Z' }),
          '--server',
          server,
          '--threshold',
          threshold,
        );
        assert.equal(pushed.stderr, '', threshold);
        assert.ok([0, 1].includes(pushed.code), `${threshold}: exit ${pushed.code}`);
      }
    });
  });
});
