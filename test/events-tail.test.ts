import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { sql } from 'kysely';
import { Database } from '../src/db/index.js';
import { EventLog, tailLog, type StoredEvent } from '../src/events/index.js';
import { createPgDatabase, DIALECTS, eventually } from './helpers/app.js';

/** Two event logs on one database: this process's, and another process's (its appends are not on this bus). */
async function openLogs(dialect: string) {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'mothership-tail-'));
  const pgDatabase = dialect === 'postgres' ? await createPgDatabase() : null;
  const database = await Database.open({ databaseUrl: pgDatabase?.url ?? null, dataDir });
  const mine = new EventLog(database, []);
  const other = new EventLog(database, []);
  let reads = 0;
  const page = mine.page.bind(mine);
  mine.page = (...args) => {
    reads++;
    return page(...args);
  };
  return {
    mine,
    other,
    reads: () => reads,
    close: async () => {
      await database.close();
      await pgDatabase?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Follows `log` from now on (or after `after`), recording the sequence numbers delivered. */
async function follow(log: EventLog, options: { pollMs?: number; after?: number; slow?: boolean } = {}) {
  const seqs: number[] = [];
  const stop = tailLog(log, {
    after: options.after,
    pollMs: options.pollMs ?? 60_000,
    deliver: async (events: StoredEvent[]) => {
      if (options.slow) await delay(20);
      seqs.push(...events.map((event) => event.seq));
    },
    onError: (error) => assert.fail(error),
  });
  await delay(100); // the position is read
  return { seqs, stop };
}

const emit = (log: EventLog, marker: number) => log.emit('anomaly.detected', { detail: { marker } });
const consecutive = (seqs: number[]) => seqs.every((seq, index) => index === 0 || seq === seqs[index - 1]! + 1);

for (const dialect of DIALECTS) {
  describe(`following the event log (${dialect})`, () => {
    let logs: Awaited<ReturnType<typeof openLogs>>;
    before(async () => (logs = await openLogs(dialect)));
    after(() => logs.close());

    it("delivers this process's events as they come, without reading the log for each, and reads it after a gap another process left", async () => {
      const { seqs, stop } = await follow(logs.mine);
      try {
        const start = await logs.mine.lastSeq();
        const readsBefore = logs.reads();
        for (let i = 0; i < 5; i++) await emit(logs.mine, i);
        await eventually(() => seqs.length === 5, 2000, 'five events');
        assert.equal(logs.reads(), readsBefore, 'no read of the log for events of this process that continue it');

        await emit(logs.other, 5); // not on this bus: the next event of this process shows the gap
        await emit(logs.mine, 6);
        await eventually(() => seqs.length === 7, 2000, 'seven events');
        assert.deepEqual(
          seqs,
          Array.from({ length: 7 }, (_, index) => start + index + 1),
        );
      } finally {
        stop();
      }
    });

    it("catchUp delivers every event committed before it, another process's too, without waiting for the poll", async () => {
      const { seqs, stop } = await follow(logs.mine);
      try {
        await emit(logs.other, 0); // not on this bus, and the poll is a minute away
        await emit(logs.other, 1);
        const last = await logs.mine.lastSeq();
        await stop.catchUp();
        assert.equal(seqs.at(-1), last);
        assert.ok(consecutive(seqs));
      } finally {
        stop();
      }
    });

    it("finds another process's events by looking every pollMs", async () => {
      const { seqs, stop } = await follow(logs.mine, { pollMs: 100 });
      try {
        const last = await logs.other.lastSeq();
        await emit(logs.other, 1);
        await eventually(() => seqs.length === 1, 2000, "the other process's event");
        assert.equal(seqs[0], last + 1);
      } finally {
        stop();
      }
    });

    it('gives a slow reader every event once and in order, whichever way each came', async () => {
      const { seqs, stop } = await follow(logs.mine, { slow: true });
      try {
        const start = await logs.mine.lastSeq();
        // More than a page while the reader is busy, some from the other process.
        for (let i = 0; i < 700; i++) await emit(i % 50 === 0 ? logs.other : logs.mine, i);
        await emit(logs.mine, 700);
        await eventually(() => seqs.length >= 701, 10_000, 'every event');
        await delay(100);
        assert.equal(seqs.length, 701);
        assert.equal(seqs[0], start + 1);
        assert.ok(consecutive(seqs), 'in order, none twice, none missing');
      } finally {
        stop();
      }
    });

    it('resumes after a position, from the log', async () => {
      const last = await logs.mine.lastSeq();
      const { seqs, stop } = await follow(logs.mine, { after: last - 3 });
      try {
        await eventually(() => seqs.length === 3, 2000, 'the three events after the position');
        assert.deepEqual(seqs, [last - 2, last - 1, last]);
      } finally {
        stop();
      }
    });
  });
}

describe('appending on PostgreSQL', () => {
  it("stores every event of an append byte for byte, whatever an array literal's characters it holds", async () => {
    const pgDatabase = await createPgDatabase();
    const dataDir = mkdtempSync(path.join(tmpdir(), 'mothership-array-'));
    const database = await Database.open({ databaseUrl: pgDatabase.url, dataDir });
    try {
      const log = new EventLog(database, []);
      const hostile = ['"},{"', '\\', 'NULL', '{a,b}', "'; drop table events; --", 'é 💥 \u2028', ' ', ''];
      const stored: StoredEvent[] = [];
      log.subscribe((event) => stored.push(event));
      await log.write(async (_trx, emit) => {
        for (const text of hostile) emit('anomaly.detected', { detail: { text } });
      });
      const rows = await database.db.selectFrom('events').select(['seq', 'payload']).orderBy('seq').execute();
      assert.deepEqual(
        rows.map((row) => [Number(row.seq), row.payload]),
        stored.map((event) => [event.seq, event.json]),
      );
      assert.deepEqual(
        rows.map((row) => JSON.parse(row.payload).detail.text),
        hostile,
      );
    } finally {
      await database.close();
      await pgDatabase.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('takes turns: an append whose transaction is still open holds back the next, so numbers commit in order', async () => {
    const pgDatabase = await createPgDatabase();
    const dataDir = mkdtempSync(path.join(tmpdir(), 'mothership-turns-'));
    const database = await Database.open({ databaseUrl: pgDatabase.url, dataDir });
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    // The first append stops inside its transaction, after its events got their numbers.
    const held = new EventLog(database, [{ prepare: async () => ({ written: async () => (entered(), await released) }) }]);
    const next = new EventLog(database, []);
    const seqs: number[] = [];
    held.subscribe((event) => seqs.push(event.seq));
    next.subscribe((event) => seqs.push(event.seq));
    try {
      const first = emit(held, 1);
      await inside;
      const second = emit(next, 2);
      // The second append waits for the first's turn to end: its number cannot commit before.
      await eventually(
        async () => {
          const { rows } = await sql<{ waiting: string }>`select count(*) as waiting from pg_locks where locktype = 'advisory' and not granted`.execute(
            database.db,
          );
          return Number(rows[0]!.waiting) === 1;
        },
        5000,
        'the second append waiting for its turn',
      );
      release();
      await Promise.all([first, second]);
      assert.equal(seqs.length, 2);
      assert.ok(seqs[0]! < seqs[1]!, `the held append's number first: ${seqs.join(', ')}`);
    } finally {
      release();
      await database.close();
      await pgDatabase.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
