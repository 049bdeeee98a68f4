import type { FastifyBaseLogger } from 'fastify';
import { sql } from 'kysely';
import type { Database } from '../db/index.js';

/**
 * How far an instance's clock may be from the database server's before it is reported. Instances
 * compare times other instances wrote (a node's last heartbeat, when a person left, when a webhook
 * retry is due, how long a claim holds), so their clocks must agree to about a second.
 */
export const CLOCK_TOLERANCE_MS = 2000;
/** How often the clock is compared: a clock drifts slowly, and a step (a bad NTP server) shows within this. */
export const CLOCK_CHECK_MS = 5 * 60 * 1000;

/**
 * How far this clock is ahead of the server's (negative: behind), as NTP reckons it: the
 * server's reading against the middle of the round trip, which bounds the error to half of it.
 */
export const clockOffset = (sentMs: number, serverMs: number, receivedMs: number) => ({
  offsetMs: (sentMs + receivedMs) / 2 - serverMs,
  uncertaintyMs: (receivedMs - sentMs) / 2,
});

/**
 * Compares this process's clock with PostgreSQL's, which every instance sharing the database sees
 * alike; warns when it is off by more than CLOCK_TOLERANCE_MS. Null on SQLite: one process, one clock.
 */
export async function checkClock(database: Database, log: FastifyBaseLogger, now = Date.now): Promise<number | null> {
  if (database.dialect !== 'postgres') return null;
  // Timed on a connection already taken: a wait for the pool would count as half an offset.
  const { offsetMs, uncertaintyMs } = await database.db.connection().execute(async (connection) => {
    await sql`select 1`.execute(connection);
    const sent = now();
    const { rows } = await sql<{ ms: string }>`select extract(epoch from clock_timestamp()) * 1000 as ms`.execute(connection);
    return clockOffset(sent, Number(rows[0]!.ms), now());
  });
  if (Math.abs(offsetMs) - uncertaintyMs > CLOCK_TOLERANCE_MS)
    log.warn(
      { offset_seconds: Math.round(offsetMs / 100) / 10 },
      `this instance's clock is ${Math.abs(offsetMs / 1000).toFixed(1)} s ${offsetMs > 0 ? 'ahead of' : 'behind'} the database server's: ` +
        'instances sharing a database compare the times each wrote (node timeouts, away delays, webhook retries), so keep every clock synchronised (NTP)',
    );
  return offsetMs;
}
