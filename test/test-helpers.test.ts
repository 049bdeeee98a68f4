// The helpers that start private servers must never hand a test someone else's server.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { waitForOwnListener, waitForPort } from './helpers/broker.js';

/** Mosquitto on 127.0.0.1:`port` only, as startBroker configures it (with `-p` it would bind IPv6 and stay up). */
function mosquittoOn(port: number) {
  const dir = mkdtempSync(path.join(tmpdir(), 'mothership-helpers-'));
  writeFileSync(path.join(dir, 'mosquitto.conf'), `listener ${port} 127.0.0.1\nallow_anonymous true\n`);
  chmodSync(dir, 0o755);
  chmodSync(path.join(dir, 'mosquitto.conf'), 0o644);
  const child = spawn('mosquitto', ['-c', path.join(dir, 'mosquitto.conf')], { stdio: 'ignore' });
  child.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  return child;
}

describe('private servers of the tests', () => {
  it('a broker whose port another process took is not taken for ours, though the port answers', async () => {
    const other = createServer().listen(0, '127.0.0.1');
    await new Promise((resolve) => other.once('listening', resolve));
    const { port } = other.address() as { port: number };
    const broker = mosquittoOn(port);
    try {
      await waitForPort(port); // what the helpers waited for: it passes at once
      await assert.rejects(waitForOwnListener(broker, port), /exited before listening on port/);
    } finally {
      broker.kill('SIGKILL');
      other.close();
    }
  });

  it('a broker on a free port is found listening', async () => {
    const probe = createServer().listen(0, '127.0.0.1');
    await new Promise((resolve) => probe.once('listening', resolve));
    const { port } = probe.address() as { port: number };
    await new Promise((resolve) => probe.close(resolve));
    const broker = mosquittoOn(port);
    try {
      await waitForOwnListener(broker, port);
    } finally {
      broker.kill('SIGKILL');
    }
  });
});
