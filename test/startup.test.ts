import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ADMIN_TOKEN, createTestEnv, type TestEnv } from './helpers/app.js';
import { LOADED_PACKAGES } from './helpers/loaded-packages.js';
import { spawnMothership, stopProcess } from './helpers/process.js';

const HOOK = new URL('./helpers/loaded-packages.js', import.meta.url).href;

/** The packages a spawned `mothership serve` has loaded once it listens (see helpers/loaded-packages.ts). */
async function packagesWhenListening(env: Record<string, string>): Promise<string[]> {
  const child = spawnMothership(['serve'], { ...env, NODE_OPTIONS: `--import=${HOOK}` });
  try {
    const line = await new Promise<string>((resolve, reject) => {
      const look = () => {
        const lines = child.output().split('\n');
        const found = lines.find((text) => text.startsWith(LOADED_PACKAGES));
        if (found) resolve(found);
      };
      child.stderr!.on('data', look);
      child.once('exit', (code) => reject(new Error(`mothership serve exited (${code}) before listening: ${child.output()}`)));
    });
    return JSON.parse(line.slice(LOADED_PACKAGES.length)) as string[];
  } finally {
    await stopProcess(child);
  }
}

describe('a default start loads only what it uses', () => {
  let testEnv: TestEnv;
  let packages: string[];
  before(async () => {
    testEnv = await createTestEnv('sqlite');
    packages = await packagesWhenListening({ DATA_DIR: testEnv.dataDir, ADMIN_TOKEN, PORT: '0' });
    assert.ok(packages.includes('better-sqlite3'), `the hook sees the packages loaded: ${packages.join(', ')}`);
  });
  after(() => testEnv.cleanup());

  it('MQTT off (the default): mqtt.js and its WebSocket transport are not loaded', () => {
    assert.deepEqual(
      packages.filter((name) => ['mqtt', 'mqtt-packet', 'ws'].includes(name)),
      [],
    );
  });

  it('runs from the bundle: Fastify and Ajv are read from one file, not from node_modules', () => {
    assert.deepEqual(
      packages.filter((name) => ['fastify', 'ajv', 'avvio', 'find-my-way'].includes(name)),
      [],
    );
  });
});
