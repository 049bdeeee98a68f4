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

export interface PreparedColumn<V, N extends string = never> {
  /** The one selected column's values, row by row. */
  execute(db: Db, values: PreparedValues<N>): Promise<V[]>;
}

/**
 * A parameter's placeholder while the query is built: it stands in for a value of whatever type the
 * builder expects there, which only the run-time value will have.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see above: any column's type
export type Param<N extends string> = (name: N) => any;

/**
 * A query Kysely builds and compiles once; each run only binds new values. Kysely otherwise builds
 * and compiles the query again on every call, which on the hot paths costs more than SQLite takes to
 * run it. `names` declares the parameters: in `build`, `param(name)` stands for the value given at
 * run time, and `execute` takes exactly those names, so a misspelt one fails to compile (and a
 * declared name the query never uses fails at start-up). Every other value is fixed. The SQL is
 * compiled for the database's dialect, so a prepared query belongs to it.
 */
export function prepare<R, const N extends string = never>(
  database: Database,
  names: readonly N[],
  build: (db: Db, param: Param<N>) => Compilable<R>,
): Prepared<R, N> {
  const query = compile(database, names, build);
  let statement: BetterSqlite3.Statement | undefined;
  return {
    execute: async (target, values) => {
      // On SQLite, when the connection is free for it (database.directConnection), the statement runs
      // at once: what Kysely's executor would do, without its per-query promises and bookkeeping.
      const connection = database.directConnection(target);
      if (!connection) return target.executeQuery(query.compiled(values));
      statement ??= connection.prepare(query.sql);
      if (statement.reader) return { rows: statement.all(query.parameters(values)) as R[] };
      const { changes } = statement.run(query.parameters(values));
      return { rows: [], numAffectedRows: BigInt(changes) };
    },
  };
}

/**
 * The same for a query that selects one column: its values, row by row. SQLite hands them over
 * plucked, without an object per row.
 */
export function prepareColumn<R, const N extends string = never>(
  database: Database,
  names: readonly N[],
  build: (db: Db, param: Param<N>) => Compilable<R>,
): PreparedColumn<R[keyof R], N> {
  const query = compile(database, names, build);
  let statement: BetterSqlite3.Statement | undefined;
  return {
    execute: async (target, values) => {
      const connection = database.directConnection(target);
      if (!connection) return (await target.executeQuery(query.compiled(values))).rows.map((row) => Object.values(row as object)[0] as R[keyof R]);
      statement ??= connection.prepare(query.sql).pluck();
      return statement.all(query.parameters(values)) as R[keyof R][];
    },
  };
}

/** Compiles the query once, with a binder per parameter: each run only fills in its values. */
function compile<R, N extends string>(database: Database, names: readonly N[], build: (db: Db, param: Param<N>) => Compilable<R>) {
  const { sql, parameters: fixed } = build(database.db, (name) => PLACEHOLDER + name).compile();
  const used = new Set<string>();
  const bind = fixed.map((value): ((values: Record<string, unknown>) => unknown) => {
    if (typeof value !== 'string' || !value.startsWith(PLACEHOLDER)) return () => value;
    const name = value.slice(PLACEHOLDER.length);
    used.add(name);
    return (values) => {
      if (values[name] === undefined) throw new TypeError(`prepared query: no value for "${name}" in ${sql}`);
      return values[name];
    };
  });
  const unused = names.filter((name) => !used.has(name));
  if (unused.length) throw new TypeError(`prepared query: "${unused.join('", "')}" declared but never used in ${sql}`);
  const parameters = (values: PreparedValues<N>) => bind.map((slot) => slot(values as Record<string, unknown>));
  return { sql, parameters, compiled: (values: PreparedValues<N>) => CompiledQuery.raw(sql, parameters(values)) as CompiledQuery<R> };
}
