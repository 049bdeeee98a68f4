import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

/** Runs `names` at quick size, each in a process of its own, and checks each printed its section and ratios. */
export async function runsQuick(names: string[], sections: string[], ratios: number): Promise<void> {
  const script = new URL('../../bench/run.js', import.meta.url).pathname;
  const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', script, '--quick', ...names], {
    timeout: 240_000,
    maxBuffer: 10 * 1024 * 1024,
  });
  for (const section of sections) assert.match(stdout, new RegExp(`## ${section}`), section);
  assert.ok((stdout.match(/^ratio /gm) ?? []).length >= ratios, stdout);
  assert.match(stdout, /^Targets: /m);
}
