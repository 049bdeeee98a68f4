import { createHmac, hash, randomBytes } from 'node:crypto';
import { type Database, unlessStorageFails } from '../db/index.js';
import type { Role } from './roles.js';

/** A session ends this long after sign-in, whatever happens. */
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;
/** ...or after this long without a request (a copied cookie left unused dies on its own). */
export const SESSION_IDLE_MS = 2 * 60 * 60 * 1000;
/** "Remember this device": the session lasts this long, used or not (a wall tablet signs in once a month). */
export const REMEMBERED_TTL_MS = 30 * 24 * 60 * 60 * 1000;
/** `last_seen_at` is written at most this often per session: a dashboard's polling is not a write per request. */
const TOUCH_EVERY_MS = 60 * 1000;

export interface SessionRow {
  created_at: string;
  last_seen_at: string;
  expires_at: string;
  token_check: string;
  remembered?: number | null;
}

/** Whether a stored session still holds at `now`: before its end, and used within its idle time (a remembered one has none shorter than its life). */
export function sessionValid(row: Pick<SessionRow, 'last_seen_at' | 'expires_at' | 'remembered'>, now: number): boolean {
  const idleMs = row.remembered ? REMEMBERED_TTL_MS : SESSION_IDLE_MS;
  return Date.parse(row.expires_at) > now && Date.parse(row.last_seen_at) + idleMs > now;
}

/** Who a live session is: a dashboard user, or (user null) whoever signed in with the admin token. */
export interface SessionIdentity {
  /** The session's public id: the SHA-256 of the cookie's id, never the id itself. */
  id: string;
  user: string | null;
  role: Role;
}

/** A session as its list shows it. */
export interface SessionView {
  id: string;
  user: string | null;
  name: string | null;
  role: Role;
  device: string | null;
  remembered: boolean;
  created_at: string;
  last_seen_at: string;
  expires_at: string;
}

export interface OpenOptions {
  user: string | null;
  remember: boolean;
  device: string | null;
}

/**
 * Server-side dashboard sessions (table `admin_sessions`): the cookie holds a random id, the
 * database only its SHA-256, so a database dump signs nobody in. Sign-out deletes the row, so a
 * copied cookie stops working at once, on every instance that shares the database. A session opened
 * with the admin token records which token it was opened under: a new admin token ends those. A
 * user's session carries a check of its own, which no admin token's matches, so a release that knows
 * no users refuses it; the user's role is read with every check, so a change applies at once.
 */
export class SessionStore {
  private readonly tokenCheck: string;

  constructor(
    private readonly database: Database,
    adminToken: string,
    private readonly secretsKey: Buffer,
  ) {
    this.tokenCheck = this.check('session-token:' + adminToken);
  }

  private check(what: string): string {
    return createHmac('sha256', this.secretsKey).update(what).digest('base64url');
  }

  private expectedCheck(user: string | null): string {
    return user === null ? this.tokenCheck : this.check('user-session:' + user);
  }

  private static key(sessionId: string): string {
    return hash('sha256', sessionId, 'base64url');
  }

  /** Opens a session; returns the id for the cookie (never stored). */
  async open({ user, remember, device }: OpenOptions): Promise<string> {
    const id = randomBytes(32).toString('base64url');
    const now = Date.now();
    await this.database.write((db) =>
      db
        .insertInto('admin_sessions')
        .values({
          id_hash: SessionStore.key(id),
          created_at: new Date(now).toISOString(),
          last_seen_at: new Date(now).toISOString(),
          expires_at: new Date(now + (remember ? REMEMBERED_TTL_MS : SESSION_TTL_MS)).toISOString(),
          token_check: this.expectedCheck(user),
          user_id: user,
          remembered: remember ? 1 : 0,
          device,
        })
        .execute(),
    );
    return id;
  }

  /** Who the cookie's session is, or null when it names no live session; refreshes its idle clock now and then, unless not to `touch` it. */
  async identify(sessionId: string, { touch = true } = {}): Promise<SessionIdentity | null> {
    const key = SessionStore.key(sessionId);
    const row = await this.withUsers().where('admin_sessions.id_hash', '=', key).executeTakeFirst();
    const now = Date.now();
    if (!row || !this.live(row, now)) return null;
    if (touch && Date.parse(row.last_seen_at) + TOUCH_EVERY_MS <= now) {
      await unlessStorageFails(
        this.database.write((db) =>
          db
            .updateTable('admin_sessions')
            .set({ last_seen_at: new Date(now).toISOString() })
            .where('id_hash', '=', key)
            .execute(),
        ),
      );
    }
    const user = row.user_id ?? null;
    return { id: key, user, role: user === null ? 'admin' : (row.role as Role) };
  }

  /** The live sessions, newest first: every one, or only `user`'s. */
  async list(user?: string): Promise<SessionView[]> {
    let query = this.withUsers().orderBy('admin_sessions.created_at', 'desc');
    if (user !== undefined) query = query.where('admin_sessions.user_id', '=', user);
    const now = Date.now();
    return (await query.execute())
      .filter((row) => this.live(row, now))
      .map((row) => ({
        id: row.id_hash,
        user: row.user_id ?? null,
        name: row.name ?? null,
        role: row.user_id ? (row.role as Role) : 'admin',
        device: row.device ?? null,
        remembered: Boolean(row.remembered),
        created_at: row.created_at,
        last_seen_at: row.last_seen_at,
        expires_at: row.expires_at,
      }));
  }

  /** The sessions, each with its user's name and role. */
  private withUsers() {
    return this.database.db
      .selectFrom('admin_sessions')
      .leftJoin('users', 'users.username', 'admin_sessions.user_id')
      .select([
        'admin_sessions.id_hash',
        'admin_sessions.user_id',
        'admin_sessions.token_check',
        'admin_sessions.created_at',
        'admin_sessions.last_seen_at',
        'admin_sessions.expires_at',
        'admin_sessions.remembered',
        'admin_sessions.device',
        'users.name',
        'users.role',
      ]);
  }

  /**
   * Whether a session is live: opened under the current admin token or its user's current check,
   * within its lifetimes, and a user's session only while the user exists (with no role it is
   * refused, like one opened under an old admin token).
   */
  private live(
    row: Pick<SessionRow, 'token_check' | 'last_seen_at' | 'expires_at' | 'remembered'> & { user_id?: string | null; role?: string | null },
    now: number,
  ): boolean {
    const user = row.user_id ?? null;
    return row.token_check === this.expectedCheck(user) && (user === null || Boolean(row.role)) && sessionValid(row, now);
  }

  /** Ends the session with public id `id` (only if it is `user`'s, when given); false when there is none. */
  async revoke(id: string, user?: string): Promise<boolean> {
    const result = await this.database.write((db) => {
      let query = db.deleteFrom('admin_sessions').where('id_hash', '=', id);
      if (user !== undefined) query = query.where('user_id', '=', user);
      return query.executeTakeFirst();
    });
    return Number(result.numDeletedRows) > 0;
  }

  async close(sessionId: string): Promise<void> {
    await this.database.write((db) => db.deleteFrom('admin_sessions').where('id_hash', '=', SessionStore.key(sessionId)).execute());
  }

  /** Sign out everywhere: every session, or only `user`'s. */
  async closeAll(user?: string): Promise<number> {
    const result = await this.database.write((db) => {
      let query = db.deleteFrom('admin_sessions');
      if (user !== undefined) query = query.where('user_id', '=', user);
      return query.executeTakeFirst();
    });
    return Number(result.numDeletedRows);
  }

  /** Deletes sessions that can no longer be used (expired, idle, or opened under an old admin token). */
  async purge(): Promise<void> {
    const now = Date.now();
    await this.database.write((db) =>
      db
        .deleteFrom('admin_sessions')
        .where((eb) =>
          eb.or([
            eb('expires_at', '<=', new Date(now).toISOString()),
            eb.and([eb('last_seen_at', '<=', new Date(now - SESSION_IDLE_MS).toISOString()), eb.or([eb('remembered', 'is', null), eb('remembered', '=', 0)])]),
            eb.and([eb('user_id', 'is', null), eb('token_check', '!=', this.tokenCheck)]),
          ]),
        )
        .execute(),
    );
  }
}
