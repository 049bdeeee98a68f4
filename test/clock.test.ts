import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { FastifyBaseLogger } from 'fastify';
import { sql } from 'kysely';
import { checkClock, clockOffset, CLOCK_TOLERANCE_MS } from '../src/ops/clock.js';
import { eventually, startTestApp, type TestApp } from './helpers/app.js';

/** A logger that keeps its warnings. */
function warnings() {
  const lines: string[] = [];
  const log = { warn: (_fields: object, message: string) => lines.push(message) } as unknown as FastifyBaseLogger;
  return { lines, log };
}

describe("an instance's clock against the database server's", () => {
  it('reckons the offset against the middle of the round trip, within half of it', () => {
    assert.deepEqual(clockOffset(1000, 900, 1040), { offsetMs: 120, uncertaintyMs: 20 });
    assert.deepEqual(clockOffset(1000, 1100, 1000), { offsetMs: -100, uncertaintyMs: 0 });
  });

  describe('on PostgreSQL', () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp('postgres', {}, { start: true });
    });
    after(() => app.cleanup());

    it('a clock in step: an offset under a second and no warning', async () => {
      const { lines, log } = warnings();
      const offset = (await checkClock(app.database, log))!;
      assert.ok(Math.abs(offset) < 1000, `offset ${offset} ms`);
      assert.deepEqual(lines, []);
    });

    it('a busy pool does not count as an offset: the time is taken on a connection already held', async () => {
      // Every connection of the pool (10) busy for 2 s: a wait for one counted as half an offset.
      const busy = Array.from({ length: 10 }, () => sql`select pg_sleep(2)`.execute(app.database.db));
      try {
        const offset = (await checkClock(app.database, warnings().log))!;
        assert.ok(Math.abs(offset) < 500, `offset ${offset} ms`);
      } finally {
        await Promise.all(busy);
      }
    });

    it('a clock a minute ahead or behind: warned, saying which way and by how much', async () => {
      const ahead = warnings();
      const offset = (await checkClock(app.database, ahead.log, () => Date.now() + 60_000))!;
      assert.ok(Math.abs(offset - 60_000) < 1000, `offset ${offset} ms`);
      assert.match(ahead.lines.join('\n'), /clock is 60\.\d s ahead of the database server's.*NTP/);
      const behind = warnings();
      await checkClock(app.database, behind.log, () => Date.now() - CLOCK_TOLERANCE_MS - 1000);
      assert.match(behind.lines.join('\n'), /clock is 3\.\d s behind/);
    });

    it('the offset is a metric, measured at start', async () => {
      const value = await eventually(async () => {
        const text = (await app.api('GET', '/metrics')).body as string;
        const found = /^mothership_clock_offset_seconds (\S+)$/m.exec(text)?.[1];
        return found !== undefined && found !== 'NaN' ? { seconds: Number(found) } : null;
      });
      assert.ok(Math.abs(value.seconds) < 1, `offset ${value.seconds} s`);
    });
  });

  it('on SQLite there is one process and one clock: nothing to compare', async () => {
    const app = await startTestApp('sqlite');
    try {
      assert.equal(await checkClock(app.database, warnings().log), null);
      assert.doesNotMatch((await app.api('GET', '/metrics')).body as string, /mothership_clock_offset_seconds/);
    } finally {
      await app.cleanup();
    }
  });
});
