import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { memo, memoByKey } from '../src/memo.js';
import { deferred } from './helpers/deferred.js';

describe('memo', () => {
  it('shares a pending load only with callers passing the same argument', async () => {
    let loads = 0;
    const gate = deferred<void>();
    const cache = memo(60_000, async (arg: string) => {
      const load = ++loads;
      if (arg === 'outside') await gate.promise;
      return `${arg}-${load}`;
    });
    const outside = cache.get('outside');
    // A caller inside a transaction must not wait for a load that waits for its connection.
    assert.equal(await cache.get('inside'), 'inside-2');
    gate.resolve();
    assert.equal(await outside, 'outside-1');
    // A settled value is shared with everyone until it expires.
    assert.equal(await cache.get('anyone'), 'inside-2');
    assert.equal(loads, 2);
  });

  it('forgets a failed load', async () => {
    let calls = 0;
    const cache = memo(60_000, async () => {
      calls++;
      if (calls === 1) throw new Error('down');
      return calls;
    });
    await assert.rejects(cache.get());
    assert.equal(await cache.get(), 2);
  });
});

describe('memoByKey', () => {
  it('loads each key once while it is fresh, and shares a pending load', async () => {
    const loads: string[] = [];
    const cache = memoByKey(60_000, async (key) => (loads.push(key), `${key}!`));
    const [a, b] = await Promise.all([cache.get('a'), cache.get('a')]);
    assert.deepEqual([a, b, await cache.get('b'), await cache.get('a')], ['a!', 'a!', 'b!', 'a!']);
    assert.deepEqual(loads, ['a', 'b']);
  });

  it('loads again after clear() and after the time to live', async () => {
    let loads = 0;
    const cache = memoByKey(30, async () => ++loads);
    assert.equal(await cache.get('k'), 1);
    cache.clear('k');
    assert.equal(await cache.get('k'), 2);
    assert.equal(await cache.get('k'), 2);
    await new Promise((resolve) => setTimeout(resolve, 60));
    assert.equal(await cache.get('k'), 3);
  });

  it('forgets a failed load', async () => {
    let calls = 0;
    const cache = memoByKey(60_000, async () => {
      if (++calls === 1) throw new Error('down');
      return calls;
    });
    await assert.rejects(cache.get('k'), /down/);
    assert.equal(await cache.get('k'), 2);
  });

  it('a load that fails after a newer one replaced it leaves the newer entry cached', async () => {
    const first = deferred<string>();
    let loads = 0;
    const cache = memoByKey(60_000, (key) => (++loads === 1 ? first.promise : Promise.resolve(`${key}-${loads}`)));
    const stale = cache.get('bot');
    cache.clear('bot'); // a local write (a rotated secret) while the first load was still reading
    assert.equal(await cache.get('bot'), 'bot-2');
    first.reject(new Error('connection reset'));
    await assert.rejects(stale, /connection reset/);
    assert.equal(await cache.get('bot'), 'bot-2');
    assert.equal(loads, 2, 'the newer entry is still cached');
  });

  it('keeps at most maxKeys entries', async () => {
    const loads: string[] = [];
    const cache = memoByKey(60_000, async (key) => (loads.push(key), key), 2);
    for (const key of ['a', 'b', 'c', 'a']) await cache.get(key);
    assert.deepEqual(loads, ['a', 'b', 'c', 'a'], 'a was dropped to make room for c');
  });
});
