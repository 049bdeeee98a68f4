import type BetterSqlite3 from 'better-sqlite3';

const MAX_STATEMENTS = 500;

/**
 * better-sqlite3 with prepared statements reused by SQL text. Kysely prepares every query anew;
 * preparing costs about as much as running a small query, and the service runs few distinct ones.
 */
export function cachingStatements(database: BetterSqlite3.Database): BetterSqlite3.Database {
  const statements = new Map<string, BetterSqlite3.Statement>();
  return new Proxy(database, {
    get(target, property, receiver) {
      if (property !== 'prepare') {
        const value = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      }
      return (sql: string) => {
        let statement = statements.get(sql);
        if (!statement) {
          statement = target.prepare(sql);
          if (statements.size >= MAX_STATEMENTS) statements.delete(statements.keys().next().value!);
          statements.set(sql, statement);
        }
        return statement;
      };
    },
  });
}
