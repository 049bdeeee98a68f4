import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { DIALECTS, startTestApp, type TestApp } from './helpers/app.js';
import { BASELINE_RECORD_LIMIT } from '../src/limits.js';
import { BASELINE_ROW_OVERHEAD } from '../src/db/index.js';

/** A valid record padded with whitespace to `bytes` as sent: it is stored as sent. */
const padded = (index: number, bytes: number) => {
  const json = JSON.stringify({
    commit_sha: `c0ffee${String(index).padStart(4, '0')}`,
    timestamp: new Date(Date.UTC(2026, 0, 1) + index * 60_000).toISOString(),
    subject_geomean: 0.5,
    grep_1000_mean_ms: 40,
  });
  return json + ' '.repeat(bytes - json.length);
};

for (const dialect of DIALECTS) {
  describe(`baselines: at most BASELINE_STORAGE_MB of records, outside the logs' budget (${dialect})`, () => {
    let app: TestApp;
    let ci: Record<string, string>;
    const RECORD = 100 * 1024;
    const PUSHES = 25;

    before(async () => {
      app = await startTestApp(dialect, { BASELINE_STORAGE_MB: '1', STORAGE_BUDGET_MB: '1' });
      ci = { authorization: `Bearer ${(await app.api('POST', '/api/tokens', { name: 'ci', scope: 'ci' })).body.token}` };
    });
    after(() => app.cleanup());

    const storedBytes = async () => {
      const { rows } = await sql<{ bytes: string | number }>`select coalesce(sum(${sql.raw(
        dialect === 'postgres' ? 'octet_length(record)' : 'length(cast(record as blob))',
      )} + ${BASELINE_ROW_OVERHEAD}), 0) as bytes from baselines`.execute(app.database.db);
      return Number(rows[0]!.bytes);
    };

    it("a ci token's padded records: the earliest runs go, the newest stay, and the household's events are still taken", async () => {
      assert.ok(RECORD < BASELINE_RECORD_LIMIT);
      let last: { detection: { runs_considered: number } } | undefined;
      for (let index = 0; index < PUSHES; index++) {
        const pushed = await app.api('POST', '/api/baselines', padded(index, RECORD), ci);
        assert.equal(pushed.status, 201, JSON.stringify(pushed.body));
        assert.ok((await storedBytes()) <= 2 ** 20, `after push ${index}: ${await storedBytes()} bytes of records`);
        last = pushed.body;
      }
      const kept = (await app.api('GET', '/api/baselines?limit=100')).body as { record: { commit_sha: string } }[];
      assert.equal(kept.length, Math.floor(2 ** 20 / (RECORD + BASELINE_ROW_OVERHEAD)));
      // Each run a commit of its own: the last push's history is every run kept before it, not the ones it deleted.
      assert.equal(last!.detection.runs_considered, kept.length - 1, 'the verdict counts no run the push deleted (outside review)');
      assert.equal(kept[0]!.record.commit_sha, `c0ffee${String(PUSHES - 1).padStart(4, '0')}`, 'the newest run is kept');
      assert.equal((await app.api('GET', '/api/baselines/1')).status, 404, 'the earliest run is gone');
      const usage = await app.database.db.selectFrom('baseline_usage').select('bytes').executeTakeFirstOrThrow();
      assert.equal(Number(usage.bytes), await storedBytes(), "the triggers' count is the records' bytes");
      // A megabyte of records against a 1 MiB budget of the logs: the logs still take events.
      const fall = await app.api('POST', '/api/events', { type: 'fall.detected' });
      assert.equal(fall.status, 202, JSON.stringify(fall.body));
    });
  });
}

describe('baselines: what small records take on disk is counted (sqlite, outside review)', () => {
  it('counts at least what the table and its indexes take, so that SQLite leaves no part of them to the logs', async () => {
    // The smallest valid records, at random times: their rows and index entries outweighed the
    // records themselves, and the uncounted rest emptied the event log.
    const app = await startTestApp('sqlite', { BASELINE_STORAGE_MB: '0', STORAGE_BUDGET_MB: '0' });
    try {
      for (let index = 0; index < 2000; index++) {
        const timestamp = new Date(Date.UTC(2026, 0, 1) + Math.floor(Math.random() * 1e10)).toISOString();
        const pushed = await app.api('POST', '/api/baselines', {
          commit_sha: `5ba11${String(index).padStart(6, '0')}`,
          timestamp,
          subject_geomean: 0.5,
          grep_1000_mean_ms: 40,
        });
        assert.equal(pushed.status, 201, JSON.stringify(pushed.body));
      }
      const { rows } = await sql<{ bytes: number }>`select sum(pgsize) as bytes from dbstat where name like 'baselines%'`.execute(app.database.db);
      const usage = await app.database.db.selectFrom('baseline_usage').select('bytes').executeTakeFirstOrThrow();
      assert.ok(Number(usage.bytes) >= rows[0]!.bytes, `counted ${usage.bytes} bytes, the table and its indexes take ${rows[0]!.bytes}`);
    } finally {
      await app.cleanup();
    }
  });
});
