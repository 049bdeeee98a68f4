import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import assert from 'node:assert/strict';
import { onEvery, pollEvery, untilNextTick } from '../src/ticks.js';

describe('polls of one period share one tick', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setInterval'] }));
  afterEach(() => mock.timers.reset());

  it('tasks started at different moments run on the same tick, the later one within a period', () => {
    const runs: string[] = [];
    const stopEarly = onEvery(1000, () => runs.push('early'));
    mock.timers.tick(300);
    const stopLate = onEvery(1000, () => runs.push('late'));
    mock.timers.tick(700);
    assert.deepEqual(runs, ['early', 'late'], 'one wake-up runs both');
    mock.timers.tick(1000);
    assert.deepEqual(runs, ['early', 'late', 'early', 'late']);
    stopEarly();
    stopLate();
  });

  it('a stopped task runs no more; the others go on; a new task after the last stop starts a new clock', () => {
    const runs: string[] = [];
    const stopA = onEvery(1000, () => runs.push('a'));
    const stopB = onEvery(1000, () => runs.push('b'));
    stopA();
    mock.timers.tick(1000);
    assert.deepEqual(runs, ['b']);
    stopB();
    mock.timers.tick(5000);
    assert.deepEqual(runs, ['b'], 'nothing runs once every task stopped');
    const stopC = onEvery(1000, () => runs.push('c'));
    mock.timers.tick(1000);
    assert.deepEqual(runs, ['b', 'c']);
    stopC();
  });

  it('the same function started twice runs twice and stops one at a time', () => {
    let runs = 0;
    const task = () => runs++;
    const stopFirst = onEvery(1000, task);
    const stopSecond = onEvery(1000, task);
    mock.timers.tick(1000);
    assert.equal(runs, 2);
    stopFirst();
    mock.timers.tick(1000);
    assert.equal(runs, 3);
    stopSecond();
  });

  it('untilNextTick resolves on the next tick, or at once when woken', async () => {
    const ticked = untilNextTick(1000);
    let resolved = false;
    void ticked.done.then(() => (resolved = true));
    mock.timers.tick(999);
    await Promise.resolve();
    assert.equal(resolved, false);
    mock.timers.tick(1);
    await ticked.done;
    const woken = untilNextTick(1000);
    woken.wake();
    await woken.done;
  });

  it('pollEvery skips the ticks that come while a run goes on, and its stop waits for that run', async () => {
    const runs: Array<() => void> = [];
    const poller = pollEvery(1000, () => new Promise<void>((resolve) => runs.push(resolve)));
    mock.timers.tick(1000);
    mock.timers.tick(1000);
    poller.run();
    assert.equal(runs.length, 1, 'one run at a time');
    let stopped = false;
    const stopping = poller.stop().then(() => (stopped = true));
    await Promise.resolve();
    assert.equal(stopped, false, 'stop waits for the run in progress');
    runs[0]!();
    await stopping;
    mock.timers.tick(5000);
    assert.equal(runs.length, 1, 'no run after the stop');
  });

  it('pollEvery runs again on the first tick after a run ended', async () => {
    let runs = 0;
    const poller = pollEvery(1000, async () => void runs++);
    poller.run();
    await new Promise(setImmediate);
    mock.timers.tick(1000);
    assert.equal(runs, 2);
    await poller.stop();
  });
});
