import { migrations } from './migrations.js';

/**
 * The schema a database is at: the names of the migrations applied to it, in order (Kysely's
 * kysely_migration table). A release refuses a schema with migrations it does not know, as Kysely
 * would, but in one sentence that says what to do instead of a stack trace.
 */
export class UnknownSchemaError extends Error {}

/** The migrations this release knows, in the order they apply (Kysely orders them by name). */
export const KNOWN_MIGRATIONS: readonly string[] = Object.keys(migrations('sqlite')).sort();
/** This release's schema: its newest migration's name. */
export const SCHEMA_VERSION = KNOWN_MIGRATIONS.at(-1)!;

/** The refusal for migrations `applied` has and `known` lacks; null when every applied one is known. */
export function unknownSchema(
  applied: readonly string[],
  known: readonly string[],
  release: { version: string; writer: string | null },
): UnknownSchemaError | null {
  const unknown = applied.filter((name) => !known.includes(name));
  if (unknown.length === 0) return null;
  const writer = release.writer ? `Mothership ${release.writer}` : 'a newer release';
  return new UnknownSchemaError(
    `The database has ${unknown.length === 1 ? 'migration' : 'migrations'} ${unknown.join(', ')}, written by ${writer}, which this ` +
      `Mothership ${release.version} (schema ${known.at(-1)}) does not know: run ${release.writer ? `${writer} or newer` : 'that release'} ` +
      `on this database, or restore the backup taken before upgrading to it (docs/operations.md, "Rollback").`,
  );
}
