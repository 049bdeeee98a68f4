import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

/** Benchmarks are measured, not timed in tests: CI only proves that each still runs, at a small size. */
describe('benchmarks (quick size)', () => {
  it('every benchmark runs and prints its ratio against the reference', async () => {
    const script = new URL('../bench/run.js', import.meta.url).pathname;
    const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', script, '--quick'], { timeout: 240_000, maxBuffer: 10 * 1024 * 1024 });
    for (const section of ['Rate limiter', 'Enrichment endpoint', 'Event fan-out', 'Baselines', 'Memory'])
      assert.match(stdout, new RegExp(`## ${section}`), section);
    assert.ok((stdout.match(/^ratio /gm) ?? []).length >= 9, stdout);
    assert.match(stdout, /^Targets: /m);
  });
});
