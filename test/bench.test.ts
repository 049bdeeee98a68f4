import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { checkFloors } from '../bench/floors.js';
import { runsQuick } from './helpers/bench.js';

/** Benchmarks are measured, not timed in tests: CI only proves that each still runs, at a small size. */
describe('benchmarks (quick size)', () => {
  // Two halves, each well inside a test file's time limit on a busy machine; bench-servers.test.ts has the others.
  it('the in-process benchmarks run and print their ratios against the reference', () =>
    runsQuick(['ratelimit', 'baselines', 'detector', 'memory'], ['Rate limiter', 'Baselines: validation', 'Baselines: regression detection', 'Memory'], 4));

  it('the guard exits 1 naming the ratio below its floor, and 0 when every ratio holds', async () => {
    const script = new URL('../bench/run.js', import.meta.url).pathname;
    const dir = mkdtempSync(path.join(tmpdir(), 'mothership-floors-'));
    try {
      const floors = path.join(dir, 'floors.json');
      // Validation can never run at 1,000 times bare Ajv; it always runs above nothing.
      writeFileSync(floors, JSON.stringify({ baselines: { 'validation vs bare Ajv': 1000, 'POST /api/baselines vs bare validating route': 0 } }));
      const run = () =>
        promisify(execFile)(process.execPath, ['--expose-gc', script, '--check', '--quick', 'baselines'], {
          timeout: 120_000,
          env: { ...process.env, BENCH_FLOORS: floors },
        });
      const failed = await run().then(
        () => assert.fail('the guard passed a ratio below its floor'),
        (error: { code: number; stdout: string }) => error,
      );
      assert.equal(failed.code, 1);
      assert.match(failed.stdout, /^FELL baselines: validation vs bare Ajv \d+\.\d+x \(floor 1000x\)$/m);
      assert.match(failed.stdout, /^held baselines: POST \/api\/baselines vs bare validating route/m);
      writeFileSync(floors, JSON.stringify({ baselines: { 'validation vs bare Ajv': 0 } }));
      const { stdout } = await run();
      assert.match(stdout, /^Every ratio held its floor\.$/m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a floor whose ratio was not measured fails the guard, so a renamed label cannot switch it off', () => {
    const { lines, held } = checkFloors({ baselines: { 'validation vs bare Ajv': 0.6, 'a renamed ratio': 0.5 } }, [
      { label: 'validation vs bare Ajv', value: 0.9 },
    ]);
    assert.equal(held, false);
    assert.deepEqual(lines, ['held baselines: validation vs bare Ajv 0.90x (floor 0.6x)', 'FELL baselines: "a renamed ratio" was not measured (floor 0.5x)']);
    assert.equal(checkFloors({ baselines: { 'validation vs bare Ajv': 0.6 } }, [{ label: 'validation vs bare Ajv', value: 0.5 }]).held, false);
  });
});
