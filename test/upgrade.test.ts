import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { CompiledQuery, sql, type Kysely } from 'kysely';
import { runAt } from '../src/baselines/schema.js';
import { SCHEMA_VERSION } from '../src/db/index.js';
import { createTestEnv, DIALECTS, eventually, startTestApp, type DialectName, type TestApp } from './helpers/app.js';
import { connect, migrateTo, PREVIOUS_SCHEMA, RELEASES, type Release } from './helpers/previous-release.js';
import { freePort } from './helpers/broker.js';
import { spawnMothership, startService, stopProcess } from './helpers/process.js';

/** What a previous release sends to the database (test/fixtures/README.md: how it was recorded). */
interface Recorded {
  dialect: DialectName;
  sql: string;
  parameters: unknown[];
}
const recorded = (release: Release) =>
  readFileSync(new URL(`../../test/fixtures/release-${release.commit}.statements.jsonl`, import.meta.url), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Recorded);
const ROLLED_BACK = new Error('rolled back');

/** Runs every recorded statement on its own, rolled back after it; returns the ones that failed, with why. */
async function replay(statements: Recorded[], db: Kysely<any>, dialect: DialectName): Promise<string[]> {
  const failures: string[] = [];
  for (const statement of statements.filter((recorded) => recorded.dialect === dialect)) {
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

/**
 * Runs every recorded statement in the order recorded, each committed, so that an update or a delete
 * finds the rows the inserts before it wrote (rolled back one by one, it matched none, and a
 * constraint or trigger on the rows it changes never ran): what each did, rows or error, by statement.
 */
async function replayInOrder(statements: Recorded[], db: Kysely<any>, dialect: DialectName): Promise<string[]> {
  const outcomes: string[] = [];
  for (const statement of statements.filter((recorded) => recorded.dialect === dialect)) {
    const outcome = await db.executeQuery(CompiledQuery.raw(statement.sql, statement.parameters)).then(
      (result) => `${String(result.numAffectedRows ?? result.rows.length)} rows`,
      (error: Error) => `failed: ${error.message}`,
    );
    outcomes.push(`${statement.sql.replace(/\s+/g, ' ').slice(0, 160)}: ${outcome}`);
  }
  return outcomes;
}

/** A baseline run of `record`'s commit and time, with the figures the tests do not look at. */
const baselineRun = (record: { commit_sha: string; timestamp: string; grep_1000_mean_ms?: number }) => ({
  subject_geomean: 0.5,
  grep_1000_mean_ms: 40,
  ...record,
});

/**
 * A release's own insert of a baseline, with the parameters it gives it: commit, recorded_at, (from
 * 0.2.0 on, the run time it computes as this release does), record.
 */
function insertsBaseline(
  statements: Recorded[],
  db: Kysely<any>,
  dialect: DialectName,
  record: { commit_sha: string; timestamp: string; grep_1000_mean_ms?: number },
) {
  const insert = statements.find((recorded) => recorded.dialect === dialect && /^insert into "baselines"/.test(recorded.sql));
  assert.ok(insert, 'the fixture has the release insert a baseline');
  const full = JSON.stringify(baselineRun(record));
  const withRunTime = /"run_at"/.test(insert.sql);
  const parameters = withRunTime
    ? [record.commit_sha, new Date().toISOString(), runAt(record.timestamp), full]
    : [record.commit_sha, new Date().toISOString(), full];
  assert.equal(insert.parameters.length, parameters.length, insert.sql);
  return db.executeQuery(CompiledQuery.raw(insert.sql, parameters));
}

for (const release of RELEASES)
  for (const dialect of DIALECTS) {
    const statements = recorded(release);
    describe(`release ${release.version} (${release.commit}) on a database this release migrated (${dialect})`, () => {
      const schemas: [string, string | undefined][] = [
        ['runs every statement it issues, reads and writes', undefined],
        ['(control: the recording replays cleanly on its own schema)', release.schema],
      ];
      for (const [title, schema] of schemas)
        it(title, async () => {
          const env = await createTestEnv(dialect);
          const db = connect(dialect, env);
          try {
            await migrateTo(db, dialect, schema);
            assert.deepEqual(await replay(statements, db, dialect), []);
          } finally {
            await db.destroy();
            await env.cleanup();
          }
        });

      it('run one after the other, its statements change as many rows here as on its own schema, and fail only where they fail there', async () => {
        const outcomes = [];
        for (const schema of [release.schema, undefined]) {
          const env = await createTestEnv(dialect);
          const db = connect(dialect, env);
          try {
            await migrateTo(db, dialect, schema);
            outcomes.push(await replayInOrder(statements, db, dialect));
          } finally {
            await db.destroy();
            await env.cleanup();
          }
        }
        const [own, here] = outcomes;
        // A statement may fail on both (the recording keeps each text's first run: a test's set-up
        // inserted one match twice). In order, updates find rows to change.
        const changing = own!.filter((outcome) => /^update .*: [1-9]\d* rows$/.test(outcome));
        assert.ok(changing.length >= 5, `updates that change rows: ${changing.length}`);
        assert.deepEqual(
          here!.flatMap((outcome, index) => (outcome === own![index] ? [] : [`${outcome} (on its own schema: ${own![index]!.replace(/^.*: /, '')})`])),
          [],
        );
      });

      it('a baseline it stores is ordered by its run time: latest and compare see it', async () => {
        const env = await createTestEnv(dialect);
        const app = await startTestApp(dialect, {}, { testEnv: env });
        const db = connect(dialect, env);
        try {
          const posted = await app.api('POST', '/api/baselines', baselineRun({ commit_sha: 'aaaaaaa', timestamp: '2026-11-24T10:00:00Z' }));
          assert.equal(posted.status, 201);
          // The release's instance records the next run: 36 % slower.
          await insertsBaseline(statements, db, dialect, { commit_sha: 'bbbbbbb', timestamp: '2026-11-24T12:00:00+01:00', grep_1000_mean_ms: 54.4 });
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

      it('a sha it stores in upper case, before the migration or beside this release, is one commit with the same sha in lower case', async () => {
        const env = await createTestEnv(dialect);
        const db = connect(dialect, env);
        let app: TestApp | undefined;
        try {
          await migrateTo(db, dialect, release.schema);
          await insertsBaseline(statements, db, dialect, { commit_sha: 'ABCDEF1', timestamp: '2026-11-24T10:00:00Z' });
          app = await startTestApp(dialect, {}, { testEnv: env });
          const stored = await app.api('GET', '/api/baselines/compare?base=abcdef1&head=latest');
          assert.equal(stored.status, 200, JSON.stringify(stored.body));
          assert.equal(stored.body.base_id, stored.body.head_id, 'found by its sha in lower case');
          const posted = await app.api('POST', '/api/baselines', baselineRun({ commit_sha: 'abcdef1', timestamp: '2026-11-24T11:00:00Z' }));
          assert.equal(posted.status, 201);
          assert.equal(posted.body.detection.fields[0].head_runs, 2, 'the stored run is the head commit’s');
          // Beside this release, during an upgrade: what the release inserts now is one commit with it too (outside review).
          await insertsBaseline(statements, db, dialect, { commit_sha: 'ABCDEF1', timestamp: '2026-11-24T12:00:00Z' });
          const newest = await app.api('GET', '/api/baselines/latest');
          const resolved = await app.api('GET', '/api/baselines/compare?base=ABCDEF1&head=latest');
          assert.equal(resolved.status, 200, JSON.stringify(resolved.body));
          assert.equal(resolved.body.base_id, newest.body.id, 'the newest run of the commit, whichever release wrote it');
          // And the release still finds a commit by the sha as it was sent: nothing it stored changed under it (outside test).
          const byCommit = statements.find(
            (recorded) => recorded.dialect === dialect && /^select .* from "baselines" where "commit_sha" = /.test(recorded.sql),
          );
          assert.ok(byCommit, 'the fixture has the release look a commit up');
          const found = await db.executeQuery<{ id: number | string }>(CompiledQuery.raw(byCommit.sql, ['ABCDEF1', 1]));
          assert.deepEqual(
            found.rows.map((row) => Number(row.id)),
            [newest.body.id],
            "the release's own lookup by the sha it stored",
          );
        } finally {
          await db.destroy();
          await app?.cleanup();
          await env.cleanup();
        }
      });

      it('a name it stores or changes is taken for this release: a create of it by name gets 409', async () => {
        const env = await createTestEnv(dialect);
        const app = await startTestApp(dialect, {}, { testEnv: env });
        const db = connect(dialect, env);
        const previous = (pattern: RegExp) => {
          const statement = statements.find((recorded) => recorded.dialect === dialect && pattern.test(recorded.sql));
          assert.ok(statement, `the fixture has the release run ${pattern}`);
          return (...parameters: unknown[]) => db.executeQuery(CompiledQuery.raw(statement.sql, parameters));
        };
        try {
          const at = new Date().toISOString();
          await previous(/^insert into "persons"/)('bob', 'Bob', 'not_home', null, null, null, at);
          // More than one statement keys at once (KEYS_PER_STATEMENT).
          for (let index = 0; index < 600; index++)
            await previous(/^insert into "persons"/)(`guest-${index}`, `Guest ${index}`, 'not_home', null, null, null, at);
          await previous(/^insert into "zones"/)('loft', 'Loft', at);
          assert.equal((await app.api('POST', '/api/persons', { id: 'carol', name: 'Carol' })).status, 201);
          assert.equal((await app.api('POST', '/api/zones', { id: 'hall', name: 'Hall' })).status, 201);
          await previous(/^update "persons" set "name" = \S+ where "id" = \S+$/)('Dave', 'carol');
          await previous(/^update "zones" set "name" = \S+ where "id" = \S+$/)('Attic', 'hall');
          const refused = async (path: string, name: string, owner: string) => {
            const answer = await app.api('POST', path, { name });
            assert.equal(answer.status, 409, `${name}: ${JSON.stringify(answer.body)}`);
            assert.match(answer.body.errors[0].message, new RegExp(`"${owner}"`));
          };
          await refused('/api/persons', 'bob', 'bob');
          await refused('/api/persons', 'guest 599', 'guest-599');
          const unkeyed = await db
            .selectFrom('persons')
            .select((row) => row.fn.countAll<string | number>().as('count'))
            .where('name_key', 'is', null)
            .executeTakeFirstOrThrow();
          assert.equal(Number(unkeyed.count), 0, 'a create keys every row it read');
          await refused('/api/persons', 'DAVE', 'carol');
          await refused('/api/zones', 'loft', 'loft');
          await refused('/api/zones', 'attic', 'hall');
          // The names it renamed away from are free again.
          assert.equal((await app.api('POST', '/api/persons', { name: 'Carol' })).status, 201);
          assert.equal((await app.api('POST', '/api/zones', { name: 'Hall' })).status, 201);
        } finally {
          await db.destroy();
          await app.cleanup();
          await env.cleanup();
        }
      });

      // A release from before 013 stored no run time; 013 computes it for the rows it left.
      if (release.schema < '013')
        it('013 repairs the baselines it stored with an empty run time before', async () => {
          const env = await createTestEnv(dialect);
          const db = connect(dialect, env);
          try {
            await migrateTo(db, dialect, '012_enrichment_requests_in_one_batch');
            await insertsBaseline(statements, db, dialect, { commit_sha: 'ccccccc', timestamp: '2026-11-24T09:30:00.250-02:00' });
            await db
              .insertInto('baselines')
              .values({ commit_sha: 'ddddddd', recorded_at: '2026-11-25T00:00:00.000Z', run_at: '', record: 'not json' })
              .execute();
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

const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** Runs a mothership command to its end: exit code, stderr alone, and everything it printed. */
async function run(args: string[], env: Record<string, string>) {
  const child = spawnMothership(args, env);
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  try {
    const [code] = (await once(child, 'exit')) as [number | null];
    return { code, stderr, output: child.output() };
  } finally {
    await stopProcess(child, 'SIGKILL');
  }
}

describe('mothership --version', () => {
  it("prints the release from package.json and this release's schema", async () => {
    const { code, output } = await run(['--version'], {});
    assert.equal(code, 0);
    assert.equal(output, `mothership ${PACKAGE_VERSION} (schema ${SCHEMA_VERSION})\n`);
  });
});

for (const dialect of DIALECTS) {
  describe(`a schema this release does not know (${dialect})`, () => {
    /** A database a later release migrated: one more migration, and (when it recorded itself) its version. */
    async function laterReleasesDatabase(writer: string | null) {
      const env = await createTestEnv(dialect);
      const db = connect(dialect, env);
      await migrateTo(db, dialect);
      await db.insertInto('kysely_migration').values({ name: '099_from_a_later_release', timestamp: new Date().toISOString() }).execute();
      if (writer)
        await db.insertInto('schema_releases').values({ schema: '099_from_a_later_release', version: writer, migrated_at: new Date().toISOString() }).execute();
      await db.destroy();
      return env;
    }

    for (const command of [['serve'], ['worker']]) {
      it(`${command[0]}: exit 2 and one sentence naming the migration, the release that wrote it and what to do`, async () => {
        const env = await laterReleasesDatabase('0.9.0');
        try {
          const { code, stderr } = await run(command, { ...env.env, LOG_LEVEL: 'info', PORT: String(await freePort()) });
          assert.equal(code, 2);
          assert.equal(
            stderr,
            `The database has migration 099_from_a_later_release, written by Mothership 0.9.0, which this Mothership ${PACKAGE_VERSION} ` +
              `(schema ${SCHEMA_VERSION}) does not know: run Mothership 0.9.0 or newer on this database, or restore the backup taken ` +
              `before upgrading to it (docs/operations.md, "Rollback").\n`,
          );
          assert.doesNotMatch(stderr, /^\s+at /m);
        } finally {
          await env.cleanup();
        }
      });
    }

    it('without a record of the release that wrote it, says so', async () => {
      const env = await laterReleasesDatabase(null);
      try {
        const { code, stderr } = await run(['serve'], { ...env.env, PORT: String(await freePort()) });
        assert.equal(code, 2);
        assert.match(
          stderr,
          /^The database has migration 099_from_a_later_release, written by a newer release, .* run that release on this database, or restore the backup/,
        );
        assert.equal(stderr.split('\n').length, 2);
      } finally {
        await env.cleanup();
      }
    });
  });

  describe(`upgrading from the previous release (${dialect})`, () => {
    it('logs one line from which schema to which, starts with its version, reports both in /readyz, records itself', async () => {
      const env = await createTestEnv(dialect);
      const db = connect(dialect, env);
      let service: Awaited<ReturnType<typeof startService>> | null = null;
      try {
        await migrateTo(db, dialect, PREVIOUS_SCHEMA);
        service = await startService({ ...env.env, LOG_LEVEL: 'info', LOG_FORMAT: 'json' }, await freePort());
        const ready = (await (await fetch(`${service.base}/readyz`)).json()) as Record<string, unknown>;
        assert.equal(ready.version, PACKAGE_VERSION);
        assert.equal(ready.schema, SCHEMA_VERSION);
        // The start line may reach the pipe after the port opened: wait for it, then compare.
        const schemaLines = () =>
          service!.child
            .output()
            .trim()
            .split('\n')
            .map((line) => (JSON.parse(line) as { msg: string }).msg)
            .filter((msg) => /schema/.test(msg));
        const messages = await eventually(() => (schemaLines().length >= 2 ? schemaLines() : null), 5000, 'the start line');
        assert.deepEqual(messages, [
          `database schema migrated from ${PREVIOUS_SCHEMA} to ${SCHEMA_VERSION}`,
          `Mothership ${PACKAGE_VERSION} (schema ${SCHEMA_VERSION}) listening on ${service.base}`,
        ]);
        assert.deepEqual(await db.selectFrom('schema_releases').select(['schema', 'version']).execute(), [
          { schema: SCHEMA_VERSION, version: PACKAGE_VERSION },
        ]);
      } finally {
        if (service) await stopProcess(service.child);
        await db.destroy();
        await env.cleanup();
      }
    });
  });
}

describe('the first creates by name after migration 031 on PostgreSQL (outside review: a burst of them timed out)', () => {
  it('creates at once over many unkeyed rows key them once and each answers', async () => {
    // Creates that each keyed every row, one waiting on the other's row locks, ran past the statement
    // timeout. Counted rather than timed (a busy machine is slow either way): each key write is
    // counted by a statement trigger.
    const app = await startTestApp('postgres', { DATABASE_TIMEOUT_MS: '30000' });
    try {
      const { db } = app.database;
      await sql`insert into persons (id, name, presence, created_at) select 'p' || n, 'Person ' || n, 'not_home', now()::text from generate_series(1, 6000) n`.execute(
        db,
      );
      await sql`create table key_writes (rows integer not null)`.execute(db);
      await sql`create function count_key_writes() returns trigger language plpgsql as $$
        begin insert into key_writes select count(*) from written; return null; end $$`.execute(db);
      await sql`create trigger count_key_writes after update on persons referencing new table as written
        for each statement execute function count_key_writes()`.execute(db);
      const answers = await Promise.all(Array.from({ length: 12 }, (_, index) => app.api('POST', '/api/persons', { name: `Newcomer ${index}` })));
      assert.deepEqual(
        answers.map((answer) => answer.status),
        answers.map(() => 201),
        JSON.stringify(answers.find((answer) => answer.status !== 201)?.body),
      );
      const unkeyed = await app.database.db
        .selectFrom('persons')
        .select((row) => row.fn.countAll<string>().as('count'))
        .where('name_key', 'is', null)
        .executeTakeFirstOrThrow();
      assert.equal(Number(unkeyed.count), 0);
      const written = await sql<{ rows: string }>`select coalesce(sum(rows), 0) as rows from key_writes`.execute(db);
      assert.equal(Number(written.rows[0]!.rows), 6000, 'each row keyed once');
    } finally {
      await app.cleanup();
    }
  });
});
