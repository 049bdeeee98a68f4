import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Database, PollGate } from '../src/db/index.js';

const zone = (id: string) => ({ id, name: id, created_at: '2026-11-26T00:00:00.000Z' });

describe('PollGate: an idle poll reads nothing until something commits or comes due', () => {
  it('on SQLite skips while nothing committed, and runs after a commit here, one by another connection, or once due', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'mothership-gate-'));
    const database = await Database.open({ databaseUrl: null, dataDir });
    try {
      const gate = new PollGate(database);
      assert.equal(gate.due(), true, 'the first poll runs');
      gate.quietUntil(Infinity);
      assert.equal(gate.due(), false, 'nothing committed: skipped');
      await database.db.selectFrom('zones').selectAll().execute();
      assert.equal(gate.due(), false, 'a read commits nothing');

      await database.write((db) => db.insertInto('zones').values(zone('kitchen')).execute());
      assert.equal(gate.due(), true, "this connection's commit");
      gate.quietUntil(Infinity);
      assert.equal(gate.due(), false);

      // Another process on the same file (a standalone worker, the CLI).
      const other = new BetterSqlite3(path.join(dataDir, 'mothership.db'));
      other.prepare('insert into zones (id, name, created_at) values (?, ?, ?)').run('hall', 'hall', '2026-11-26T00:00:00.000Z');
      other.close();
      assert.equal(gate.due(), true, "another connection's commit");

      const dueAt = Date.now() + 60_000;
      gate.quietUntil(dueAt);
      assert.equal(gate.due(dueAt - 1), false, 'before it comes due');
      assert.equal(gate.due(dueAt), true, 'once due by the clock');
      assert.equal(gate.due(), true, 'a poll that does not call quietUntil runs every time');
    } finally {
      await database.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('without a commit mark (PostgreSQL: other instances commit unseen) every poll runs', async () => {
    const gate = new PollGate({ commitMark: () => null });
    assert.equal(gate.due(), true);
    gate.quietUntil(Infinity);
    assert.equal(gate.due(), true);
    let read = false;
    await gate.quietUntilNext(async () => {
      read = true;
      return Infinity;
    });
    assert.equal(read, false, 'what comes due is not read where it cannot skip a poll');
    assert.equal(gate.due(), true);
  });
  it("an overlapping poll's late answer does not silence what a later poll found due (the away sweep's ticks overlap on a busy machine)", async () => {
    let mark = 1;
    const gate = new PollGate({ commitMark: () => mark });
    assert.equal(gate.due(0), true, 'poll A runs');
    let answerA: (at: number) => void = () => {};
    // A reads what comes due before the commit below (nothing), and answers late.
    const quietA = gate.quietUntilNext(() => new Promise<number>((resolve) => (answerA = resolve)));
    mark++; // a person leaves a zone: away once the delay has run out
    assert.equal(gate.due(0), true, 'poll B runs after the commit');
    await gate.quietUntilNext(async () => 1000);
    answerA(Infinity);
    await quietA;
    assert.equal(gate.due(1000), true, 'the person comes due by the clock: the sweep runs');
  });
});
