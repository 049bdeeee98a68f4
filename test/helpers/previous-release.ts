import assert from 'node:assert/strict';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, Migrator, PostgresDialect, SqliteDialect } from 'kysely';
import pg from 'pg';
import { migrations } from '../../src/db/migrations.js';
import type { DialectName, TestEnv } from './app.js';

/** The newest migration the previous release (df8e124, 0.1.0) knows. */
export const PREVIOUS_SCHEMA = '006_admin_sessions';

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
