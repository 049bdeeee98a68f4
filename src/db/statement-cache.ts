import type BetterSqlite3 from 'better-sqlite3';
import type { SqliteDatabase } from 'kysely';

const MAX_STATEMENTS = 500;

/**
 * better-sqlite3 as Kysely's SqliteDatabase, with prepared statements reused by SQL text. Kysely
 * prepares every query anew; preparing costs about as much as running a small query, and the service
 * runs few distinct ones.
 */
export function cachingStatements(database: BetterSqlite3.Database): SqliteDatabase {
  const statements = new Map<string, BetterSqlite3.Statement>();
  return {
    close: () => database.close(),
    prepare(sql: string) {
      let statement = statements.get(sql);
      if (!statement) {
        statement = database.prepare(sql);
        if (statements.size >= MAX_STATEMENTS) statements.delete(statements.keys().next().value!);
        statements.set(sql, statement);
      }
      return statement;
    },
  };
}
