import { CompiledQuery, type Compilable, type QueryResult } from 'kysely';
import type BetterSqlite3 from 'better-sqlite3';
import type { Database, Db } from './database.js';

/** Stands in for a value while the query is built; it cannot collide with real data (a NUL prefix). */
const PLACEHOLDER = '\u0000prepared:';

/** The values of one run, by parameter name: every name the query declared, no other. */
export type PreparedValues<N extends string> = { readonly [K in N]: unknown };

export interface Prepared<R, N extends string = never> {
  /** Runs the query with these values, on the database or inside a transaction. */
  execute(db: Db, values: PreparedValues<N>): Promise<QueryResult<R>>;
}

/**
 * A query Kysely builds and compiles once; each run only binds new values. Kysely otherwise builds
 * and compiles the query again on every call, which on the hot paths costs more than SQLite takes to
 * run it. `names` declares the parameters: in `build`, `param(name)` stands for the value given at
 * run time, and `execute` takes exactly those names, so a misspelt one fails to compile (and a
 * declared name the query never uses fails at start-up). Every other value is fixed. The SQL is
 * compiled for the database's dialect, so a prepared query belongs to it.
 */
/**
 * A parameter's placeholder while the query is built: it stands in for a value of whatever type the
 * builder expects there, which only the run-time value will have.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see above: any column's type
export type Param<N extends string> = (name: N) => any;

export function prepare<R, const N extends string = never>(
  database: Database,
  names: readonly N[],
  build: (db: Db, param: Param<N>) => Compilable<R>,
): Prepared<R, N> {
  const compiled = build(database.db, (name) => PLACEHOLDER + name).compile();
  const used = new Set<string>();
  const bind = compiled.parameters.map((value): ((values: Record<string, unknown>) => unknown) => {
    if (typeof value !== 'string' || !value.startsWith(PLACEHOLDER)) return () => value;
    const name = value.slice(PLACEHOLDER.length);
    used.add(name);
    return (values) => {
      if (values[name] === undefined) throw new TypeError(`prepared query: no value for "${name}" in ${compiled.sql}`);
      return values[name];
    };
  });
  const unused = names.filter((name) => !used.has(name));
  if (unused.length) throw new TypeError(`prepared query: "${unused.join('", "')}" declared but never used in ${compiled.sql}`);
  let statement: ReturnType<BetterSqlite3.Database['prepare']> | undefined;
  return {
    execute: async (target, values) => {
      const parameters = bind.map((slot) => slot(values as Record<string, unknown>));
      // On SQLite, when the connection is free for it (database.directConnection), the statement runs
      // at once: what Kysely's executor would do, without its per-query promises and bookkeeping.
      const connection = database.directConnection(target);
      if (!connection) return target.executeQuery(CompiledQuery.raw(compiled.sql, parameters) as CompiledQuery<R>);
      statement ??= connection.prepare(compiled.sql);
      if (statement.reader) return { rows: statement.all(parameters) as R[] };
      const { changes } = statement.run(parameters);
      return { rows: [], numAffectedRows: BigInt(changes) };
    },
  };
}
