import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { CompiledQuery, Kysely, Migrator, PostgresDialect, SqliteDialect } from 'kysely';
import pg from 'pg';
import { migrations } from '../src/db/migrations.js';
import { runAt } from '../src/baselines/schema.js';
import { createTestEnv, DIALECTS, startTestApp, type DialectName, type TestEnv } from './helpers/app.js';

/** What the previous release sends to the database (test/fixtures/README.md: how it was recorded). */
interface Recorded {
  dialect: DialectName;
  sql: string;
  parameters: unknown[];
}
const PREVIOUS_RELEASE = readFileSync(new URL('../../test/fixtures/release-df8e124.statements.jsonl', import.meta.url), 'utf8')
  .trim()
  .split('\n')
  .map((line) => JSON.parse(line) as Recorded);
/** The newest migration the previous release knows. */
const PREVIOUS_SCHEMA = '006_admin_sessions';

/** A plain Kysely on the test environment's database, as the previous release's driver talks to it. */
function connect(dialect: DialectName, env: TestEnv): Kysely<any> {
  return new Kysely<any>({
    dialect:
      dialect === 'postgres'
        ? new PostgresDialect({ pool: new pg.Pool({ connectionString: env.env.DATABASE_URL, max: 1 }) })
        : new SqliteDialect({ database: new BetterSqlite3(path.join(env.dataDir, 'mothership.db')) }),
  });
}

const migrateTo = async (db: Kysely<any>, dialect: DialectName, name?: string) => {
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations(dialect) } });
  const { error } = await (name ? migrator.migrateTo(name) : migrator.migrateToLatest());
  assert.equal(error, undefined);
};

const ROLLED_BACK = new Error('rolled back');

/** Runs every recorded statement on its own, rolled back after it; returns the ones that failed, with why. */
async function replay(db: Kysely<any>, dialect: DialectName): Promise<string[]> {
  const failures: string[] = [];
  for (const statement of PREVIOUS_RELEASE.filter((recorded) => recorded.dialect === dialect)) {
    const error = await db
      .transaction()
      .execute(async (trx) => {
        await trx.executeQuery(CompiledQuery.raw(statement.sql, statement.parameters));
        throw ROLLED_BACK;
      })
      .catch((error: unknown) => error);
    if (error !== ROLLED_BACK) failures.push(`${statement.sql.slice(0, 120)}: ${(error as Error).message}`);
  }
  return failures;
}

/** The previous release's own insert of a baseline, with its parameters: commit, recorded_at, record. */
function previousReleaseInsertsBaseline(db: Kysely<any>, dialect: DialectName, record: { commit_sha: string; timestamp: string; grep_1000_mean_ms?: number }) {
  const insert = PREVIOUS_RELEASE.find((recorded) => recorded.dialect === dialect && /^insert into "baselines"/.test(recorded.sql));
  assert.ok(insert, 'the fixture has the previous release insert a baseline');
  const full = { subject_geomean: 0.5, grep_1000_mean_ms: 40, ...record };
  return db.executeQuery(CompiledQuery.raw(insert.sql, [record.commit_sha, new Date().toISOString(), JSON.stringify(full)]));
}

for (const dialect of DIALECTS) {
  describe(`the previous release (df8e124) on a database this release migrated (${dialect})`, () => {
    it('runs every statement it issues, reads and writes', async () => {
      const env = await createTestEnv(dialect);
      const db = connect(dialect, env);
      try {
        await migrateTo(db, dialect);
        assert.deepEqual(await replay(db, dialect), []);
      } finally {
        await db.destroy();
        await env.cleanup();
      }
    });

    it('(control: the recording replays cleanly on its own schema)', async () => {
      const env = await createTestEnv(dialect);
      const db = connect(dialect, env);
      try {
        await migrateTo(db, dialect, PREVIOUS_SCHEMA);
        assert.deepEqual(await replay(db, dialect), []);
      } finally {
        await db.destroy();
        await env.cleanup();
      }
    });

    it('a baseline it stores is ordered by its run time: latest and compare see it', async () => {
      const env = await createTestEnv(dialect);
      const app = await startTestApp(dialect, {}, { testEnv: env });
      const db = connect(dialect, env);
      try {
        const posted = await app.api('POST', '/api/baselines', {
          commit_sha: 'aaaaaaa',
          timestamp: '2026-11-24T10:00:00Z',
          subject_geomean: 0.5,
          grep_1000_mean_ms: 40,
        });
        assert.equal(posted.status, 201);
        // The older instance records the next run: 36 % slower.
        await previousReleaseInsertsBaseline(db, dialect, { commit_sha: 'bbbbbbb', timestamp: '2026-11-24T12:00:00+01:00', grep_1000_mean_ms: 54.4 });
        const latest = await app.api('GET', '/api/baselines/latest');
        assert.equal(latest.body.record.commit_sha, 'bbbbbbb');
        const compared = await app.api('GET', '/api/baselines/compare?base=aaaaaaa&head=latest');
        assert.equal(compared.status, 200);
        assert.equal(compared.body.head.commit_sha, 'bbbbbbb');
        assert.equal(compared.body.regressed, true);
        const { run_at } = await db.selectFrom('baselines').select('run_at').where('commit_sha', '=', 'bbbbbbb').executeTakeFirstOrThrow();
        assert.equal(run_at, runAt('2026-11-24T12:00:00+01:00'));
      } finally {
        await db.destroy();
        await app.cleanup();
        await env.cleanup();
      }
    });

    it('013 repairs the baselines it stored with an empty run time before', async () => {
      const env = await createTestEnv(dialect);
      const db = connect(dialect, env);
      try {
        await migrateTo(db, dialect, '012_enrichment_requests_in_one_batch');
        await previousReleaseInsertsBaseline(db, dialect, { commit_sha: 'ccccccc', timestamp: '2026-11-24T09:30:00.250-02:00' });
        await db.insertInto('baselines').values({ commit_sha: 'ddddddd', recorded_at: '2026-11-25T00:00:00.000Z', run_at: '', record: 'not json' }).execute();
        await migrateTo(db, dialect);
        const rows = await db.selectFrom('baselines').select(['commit_sha', 'run_at']).orderBy('id').execute();
        assert.deepEqual(rows, [
          { commit_sha: 'ccccccc', run_at: runAt('2026-11-24T09:30:00.250-02:00') },
          // Not a record the previous release could have written; its posting time stands in.
          { commit_sha: 'ddddddd', run_at: '2026-11-25T00:00:00.000Z' },
        ]);
      } finally {
        await db.destroy();
        await env.cleanup();
      }
    });
  });
}
