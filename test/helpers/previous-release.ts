import assert from 'node:assert/strict';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, Migrator, PostgresDialect, SqliteDialect } from 'kysely';
import pg from 'pg';
import { migrations } from '../../src/db/migrations.js';
import type { DialectName, TestEnv } from './app.js';

/** A release before this one: its commit, and the newest migration it knows. */
export interface Release {
  version: string;
  commit: string;
  schema: string;
}
/** The releases a database this tree migrates may still have beside it, the newest first (test/fixtures/README.md). */
export const RELEASES: Release[] = [
  { version: '0.2.0', commit: 'f53569a', schema: '019_mqtt_retained' },
  { version: '0.1.0', commit: 'df8e124', schema: '006_admin_sessions' },
];
/** The newest migration the previous release knows. */
export const PREVIOUS_SCHEMA = RELEASES[0].schema;

/** A plain Kysely on the test environment's database, as the previous release's driver talks to it. */
export function connect(dialect: DialectName, env: Pick<TestEnv, 'dataDir' | 'env'>): Kysely<any> {
  return new Kysely<any>({
    dialect:
      dialect === 'postgres'
        ? new PostgresDialect({ pool: new pg.Pool({ connectionString: env.env.DATABASE_URL, max: 1 }) })
        : new SqliteDialect({ database: new BetterSqlite3(path.join(env.dataDir, 'mothership.db')) }),
  });
}

/** Migrates to `name` (a release's newest migration), or to this tree's latest. */
export async function migrateTo(db: Kysely<any>, dialect: DialectName, name?: string): Promise<void> {
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations(dialect) } });
  const { error } = await (name ? migrator.migrateTo(name) : migrator.migrateToLatest());
  assert.equal(error, undefined);
}
