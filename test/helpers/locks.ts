import { sql, type Kysely } from 'kysely';
import { deferred } from './deferred.js';

/**
 * Holds a PostgreSQL advisory lock on a pooled connection of `db` until `release()` (safe to call
 * again): a test's way to make a statement of the service wait. Release it in `finally`, or the
 * pool's end waits for the connection for good.
 */
export async function holdAdvisoryLock(db: Kysely<any>, lock: number): Promise<{ release: () => Promise<void> }> {
  const held = deferred<void>();
  const released = deferred<void>();
  const holder = db.connection().execute(async (connection) => {
    await sql`select pg_advisory_lock(${lock})`.execute(connection);
    held.resolve();
    await released.promise;
    await sql`select pg_advisory_unlock(${lock})`.execute(connection);
  });
  await Promise.race([held.promise, holder]);
  return {
    release: async () => {
      released.resolve();
      await holder;
    },
  };
}
