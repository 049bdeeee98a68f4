import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { runsQuick } from './helpers/bench.js';
import { eventually } from './helpers/app.js';

/** The process ids `pid` started that still run (a zombie has ended). */
function runningChildren(pid: number): number[] {
  return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean).map(Number).filter(running);
}
function running(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]![0] !== 'Z';
  } catch {
    return false;
  }
}

/** The benchmarks that start services, brokers and load generators: the other half of bench.test.ts's proof that each still runs. */
describe('benchmarks with servers (quick size)', () => {
  it('the HTTP and MQTT benchmarks run and print their ratios against the reference', () =>
    runsQuick(['enrichment', 'fanout', 'ingest', 'mqtt-sync', 'idle'], ['Enrichment endpoint', 'Event fan-out', 'Event ingest', 'MQTT full sync', 'Idle'], 5));

  it('the idle benchmark ends the processes it started when it is stopped', async () => {
    for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
      const runner = spawn(process.execPath, [new URL('../bench/run.js', import.meta.url).pathname, 'idle'], { stdio: 'ignore' });
      let children: number[] = [];
      try {
        // The service and the bare reference: the benchmark is measuring.
        children = await eventually(() => (runningChildren(runner.pid!).length === 2 ? runningChildren(runner.pid!) : null), 60_000, 'both started');
        const exited = new Promise((resolve) => runner.once('exit', (_code, received) => resolve(received)));
        runner.kill(signal);
        assert.equal(await exited, signal, 'ended by the signal, as without a handler');
        // SIGKILL's end is not instant: wait for it, not for a time.
        await eventually(() => children.every((pid) => !running(pid)), 10_000, `both ended after ${signal}`);
      } finally {
        // A failed run leaves nothing running either.
        for (const pid of [...children, ...(runner.exitCode === null && runner.signalCode === null ? runningChildren(runner.pid!) : [])])
          if (running(pid)) process.kill(pid, 'SIGKILL');
        runner.kill('SIGKILL');
      }
    }
  });
});
