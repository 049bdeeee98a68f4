import { createHmac, hash, randomBytes } from 'node:crypto';
import type { Database } from '../db/index.js';

/** A session ends this long after sign-in, whatever happens. */
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;
/** ...or after this long without a request (a copied cookie left unused dies on its own). */
export const SESSION_IDLE_MS = 2 * 60 * 60 * 1000;
/** `last_seen_at` is written at most this often per session: a dashboard's polling is not a write per request. */
const TOUCH_EVERY_MS = 60 * 1000;

export interface SessionRow {
  created_at: string;
  last_seen_at: string;
  expires_at: string;
  token_check: string;
}

/** Whether a stored session still holds at `now`: before its end, and used within the idle time. */
export function sessionValid(row: Pick<SessionRow, 'last_seen_at' | 'expires_at'>, now: number): boolean {
  return Date.parse(row.expires_at) > now && Date.parse(row.last_seen_at) + SESSION_IDLE_MS > now;
}

/**
 * Server-side dashboard sessions (table `admin_sessions`): the cookie holds a random id, the
 * database only its SHA-256, so a database dump signs nobody in. Sign-out deletes the row, so a
 * copied cookie stops working at once, on every instance that shares the database. Each row also
 * records which admin token it was opened under: a new admin token ends every session.
 */
export class SessionStore {
  private readonly tokenCheck: string;

  constructor(
    private readonly database: Database,
    adminToken: string,
    secretsKey: Buffer,
  ) {
    this.tokenCheck = createHmac('sha256', secretsKey)
      .update('session-token:' + adminToken)
      .digest('base64url');
  }

  private static key(sessionId: string): string {
    return hash('sha256', sessionId, 'base64url');
  }

  /** Opens a session; returns the id for the cookie (never stored). */
  async open(): Promise<string> {
    const id = randomBytes(32).toString('base64url');
    const now = Date.now();
    await this.database.write((db) =>
      db
        .insertInto('admin_sessions')
        .values({
          id_hash: SessionStore.key(id),
          created_at: new Date(now).toISOString(),
          last_seen_at: new Date(now).toISOString(),
          expires_at: new Date(now + SESSION_TTL_MS).toISOString(),
          token_check: this.tokenCheck,
        })
        .execute(),
    );
    return id;
  }

  /** True when the id names a live session; refreshes its idle clock now and then. */
  async check(sessionId: string): Promise<boolean> {
    const key = SessionStore.key(sessionId);
    const row = await this.database.db.selectFrom('admin_sessions').selectAll().where('id_hash', '=', key).executeTakeFirst();
    const now = Date.now();
    if (!row || row.token_check !== this.tokenCheck || !sessionValid(row, now)) return false;
    if (Date.parse(row.last_seen_at) + TOUCH_EVERY_MS <= now) {
      await this.database.write((db) =>
        db
          .updateTable('admin_sessions')
          .set({ last_seen_at: new Date(now).toISOString() })
          .where('id_hash', '=', key)
          .execute(),
      );
    }
    return true;
  }

  async close(sessionId: string): Promise<void> {
    await this.database.write((db) => db.deleteFrom('admin_sessions').where('id_hash', '=', SessionStore.key(sessionId)).execute());
  }

  /** Sign out everywhere. */
  async closeAll(): Promise<number> {
    const result = await this.database.write((db) => db.deleteFrom('admin_sessions').executeTakeFirst());
    return Number(result.numDeletedRows);
  }

  /** Deletes sessions that can no longer be used (expired, idle, or opened under an old token). */
  async purge(): Promise<void> {
    const now = Date.now();
    await this.database.write((db) =>
      db
        .deleteFrom('admin_sessions')
        .where((eb) =>
          eb.or([
            eb('expires_at', '<=', new Date(now).toISOString()),
            eb('last_seen_at', '<=', new Date(now - SESSION_IDLE_MS).toISOString()),
            eb('token_check', '!=', this.tokenCheck),
          ]),
        )
        .execute(),
    );
  }
}
