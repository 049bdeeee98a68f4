import { CompiledQuery, type Compilable, type QueryResult } from 'kysely';
import type { Database, Db } from './database.js';

/** Stands in for a value while the query is built; it cannot collide with real data (a NUL prefix). */
const PLACEHOLDER = '\u0000prepared:';

type Values = Record<string, unknown>;

export interface Prepared<R> {
  /** Runs the query with these values, on the database or inside a transaction. */
  execute(db: Db, values: Values): Promise<QueryResult<R>>;
}

/**
 * A query Kysely builds and compiles once; each run only binds new values. Kysely otherwise builds
 * and compiles the query again on every call, which on the hot paths costs more than SQLite takes to
 * run it. In `build`, `param(name)` stands for a value given at run time; every other value is
 * fixed. The SQL is compiled for the database's dialect, so a prepared query belongs to it.
 */
export function prepare<R>(database: Database, build: (db: Db, param: (name: string) => any) => Compilable<R>): Prepared<R> {
  const compiled = build(database.db, (name) => PLACEHOLDER + name).compile();
  const bind = compiled.parameters.map((value): ((values: Values) => unknown) => {
    if (typeof value !== 'string' || !value.startsWith(PLACEHOLDER)) return () => value;
    const name = value.slice(PLACEHOLDER.length);
    return (values) => {
      if (values[name] === undefined) throw new TypeError(`prepared query: no value for "${name}" in ${compiled.sql}`);
      return values[name];
    };
  });
  return {
    execute: async (target, values) => {
      const parameters = bind.map((slot) => slot(values));
      // On SQLite, when the connection is free for it (database.directStatement), the statement runs
      // at once: what Kysely's executor would do, without its per-query promises and bookkeeping.
      const statement = database.directStatement(target, compiled.sql);
      if (!statement) return target.executeQuery(CompiledQuery.raw(compiled.sql, parameters) as CompiledQuery<R>);
      if (statement.reader) return { rows: statement.all(parameters) as R[] };
      const { changes } = statement.run(parameters);
      return { rows: [], numAffectedRows: BigInt(changes) };
    },
  };
}
