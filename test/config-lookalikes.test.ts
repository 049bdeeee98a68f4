import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createTestEnv, eventually, type TestEnv } from './helpers/app.js';
import { MAIN, spawnMothership, stopProcess } from './helpers/process.js';

/** The start-up warning about mistyped variables, from real processes: once, naming the variable meant, never a value. */
const VALUE = 'value-that-must-not-be-printed';
const warnings = (output: string) => output.split('\n').filter((line) => line.includes('look like Mothership'));
/** The warning lines once there is one (a start takes seconds on a loaded machine). */
const firstWarnings = (output: () => string) => eventually(() => (warnings(output()).length ? warnings(output()) : null), 60_000, 'the warning');

describe('variables that look like ours are named at start', () => {
  let testEnv: TestEnv;
  before(async () => {
    testEnv = await createTestEnv('sqlite', { LOG_LEVEL: 'info', LOG_FORMAT: 'json' });
  });
  after(() => testEnv.cleanup());

  it('serve: one warning log line naming NODE_TIMEOUT_MS for NODE_TIMEOUT, without its value', async () => {
    const child = spawnMothership(['serve'], { ...testEnv.env, PORT: '0', NODE_TIMEOUT: VALUE, MOTHERSHIP_FOO: VALUE });
    try {
      const [line] = await firstWarnings(child.output);
      const entry = JSON.parse(line!);
      assert.equal(entry.level, 40);
      assert.equal(
        entry.msg,
        "Ignored environment variables that look like Mothership's: MOTHERSHIP_FOO (not a Mothership variable), NODE_TIMEOUT (did you mean NODE_TIMEOUT_MS?); docs/configuration.md lists them all",
      );
    } finally {
      await stopProcess(child);
    }
    assert.equal(warnings(child.output()).length, 1, 'once');
    assert.doesNotMatch(child.output(), new RegExp(VALUE));
  });

  it('worker: the same warning in its log', async () => {
    const child = spawnMothership(['worker'], { ...testEnv.env, REDIS_URI: VALUE });
    try {
      const [line] = await firstWarnings(child.output);
      assert.match(JSON.parse(line!).msg, /REDIS_URI \(did you mean REDIS_URL\?\)/);
    } finally {
      await stopProcess(child);
    }
    assert.doesNotMatch(child.output(), new RegExp(VALUE));
  });

  it('a CLI command that reads the environment: one stderr line, and none when every name is right', async () => {
    const run = (env: Record<string, string>) =>
      new Promise<string>((resolve) =>
        // Nothing listens on port 9: the command fails after the warning, which is all this needs.
        execFile(
          process.execPath,
          [MAIN, 'bots', 'list', '--server', 'http://127.0.0.1:9'],
          { env: { PATH: process.env.PATH ?? '', ...env } },
          (_error, _stdout, stderr) => resolve(stderr),
        ),
      );
    const mistyped = await run({ MOTHERSHIP_TOKN: VALUE });
    assert.deepEqual(warnings(mistyped), [
      "Ignored environment variables that look like Mothership's: MOTHERSHIP_TOKN (did you mean MOTHERSHIP_TOKEN?); docs/configuration.md lists them all",
    ]);
    assert.doesNotMatch(mistyped, new RegExp(VALUE));
    assert.deepEqual(warnings(await run({ MOTHERSHIP_TOKEN: VALUE })), []);
  });
});
