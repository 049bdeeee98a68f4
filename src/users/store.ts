import { now, type Database } from '../db/index.js';
import { conflict, notFound } from '../errors.js';
import type { Role } from '../http/index.js';
import { decoyHash, hashPassword, verifyPassword } from './password.js';

export interface UserView {
  username: string;
  name: string;
  role: Role;
  created_at: string;
}

const COLUMNS = ['username', 'name', 'role', 'created_at'] as const;
const view = (row: { username: string; name: string; role: string; created_at: string }): UserView => ({ ...row, role: row.role as Role });

/**
 * Dashboard users (table `users`): a sign-in name, a display name, a role and a scrypt hash of the
 * password. A new password or a deletion ends the user's sessions in the same transaction.
 */
export class UserStore {
  constructor(private readonly database: Database) {}

  /** Creates a user; a name already taken is a 409, never a silent `-2`. */
  async create(input: { username: string; name?: string; role: Role; password: string }): Promise<UserView> {
    const row = {
      username: input.username,
      name: input.name ?? input.username,
      role: input.role,
      password_hash: await hashPassword(input.password),
      created_at: now(),
    };
    const inserted = await this.database.write((db) =>
      db
        .insertInto('users')
        .values(row)
        .onConflict((c) => c.column('username').doNothing())
        .returning('username')
        .executeTakeFirst(),
    );
    if (!inserted) throw conflict(`A user named "${input.username}" already exists`);
    return view(row);
  }

  async list(): Promise<UserView[]> {
    return (await this.database.db.selectFrom('users').select(COLUMNS).orderBy('username').execute()).map(view);
  }

  async get(username: string): Promise<UserView> {
    const row = await this.database.db.selectFrom('users').select(COLUMNS).where('username', '=', username).executeTakeFirst();
    if (!row) throw notFound('User', username);
    return view(row);
  }

  /** Renames, changes the role (effective at the user's next request) or sets a new password (ending the user's sessions). */
  async update(username: string, change: { name?: string; role?: Role; password?: string }): Promise<UserView> {
    if (change.name === undefined && change.role === undefined && change.password === undefined) return this.get(username);
    const passwordHash = change.password === undefined ? undefined : await hashPassword(change.password);
    const updated = await this.database.transaction(async (trx) => {
      const row = await trx
        .updateTable('users')
        .set({
          ...(change.name !== undefined && { name: change.name }),
          ...(change.role && { role: change.role }),
          ...(passwordHash && { password_hash: passwordHash }),
        })
        .where('username', '=', username)
        .returning(COLUMNS)
        .executeTakeFirst();
      if (row && passwordHash) await trx.deleteFrom('admin_sessions').where('user_id', '=', username).execute();
      return row;
    });
    if (!updated) throw notFound('User', username);
    return view(updated);
  }

  /** Deletes the user and ends their sessions. */
  async remove(username: string): Promise<void> {
    const deleted = await this.database.transaction(async (trx) => {
      const result = await trx.deleteFrom('users').where('username', '=', username).executeTakeFirst();
      await trx.deleteFrom('admin_sessions').where('user_id', '=', username).execute();
      return Number(result.numDeletedRows);
    });
    if (!deleted) throw notFound('User', username);
  }

  /** The user a name and password sign in, or null; an unknown name costs the same hash as a known one. */
  async verify(username: string, password: string): Promise<{ username: string; role: Role } | null> {
    const row = await this.database.db.selectFrom('users').select(['username', 'role', 'password_hash']).where('username', '=', username).executeTakeFirst();
    const matches = await verifyPassword(password, row?.password_hash ?? (await decoyHash()));
    return row && matches ? { username: row.username, role: row.role as Role } : null;
  }
}
