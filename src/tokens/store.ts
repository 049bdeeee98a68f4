import { hash, randomBytes } from 'node:crypto';
import { type Database, insertWithNewId, now, uniqueId, unlessStorageFails } from '../db/index.js';
import type { ApiCredential, TokenScope } from '../http/index.js';
import { notFound } from '../errors.js';
import { memoByKey } from '../memo.js';

/** How long a looked-up token is trusted: a revocation on another instance takes effect within this time. */
export const TOKEN_CACHE_MS = 5000;
/** `last_used_at` is written at most this often per token: a polling sensor is not a write per request. */
const TOUCH_EVERY_MS = 60 * 1000;
const PREFIX = 'mst_';

export interface ApiTokenView {
  id: string;
  name: string;
  scope: TokenScope;
  created_at: string;
  last_used_at: string | null;
}

/** 256 random bits: SHA-256 of the token is a safe lookup key (no salt or slow hash needed for a secret nobody chose). */
const newToken = () => PREFIX + randomBytes(32).toString('base64url');
const digest = (token: string) => hash('sha256', token, 'base64url');

/**
 * Scoped API tokens (table `api_tokens`): shown once at creation, stored as their SHA-256 only, and
 * looked up by that hash, so a database dump authenticates nobody and no comparison leaks timing.
 */
export class ApiTokenStore {
  private readonly byHash = memoByKey(TOKEN_CACHE_MS, (tokenHash) => this.load(tokenHash));
  /** When this instance last wrote each token's `last_used_at`, by hash. */
  private readonly touched = new Map<string, number>();

  constructor(private readonly database: Database) {}

  async create(input: { name: string; scope: TokenScope }): Promise<ApiTokenView & { token: string }> {
    const token = newToken();
    const tokenHash = digest(token);
    const createdAt = now();
    const id = (await this.database.transaction((trx) =>
      insertWithNewId(
        trx,
        'api_tokens',
        undefined,
        () => uniqueId(trx, 'api_tokens', input.name, 'token'),
        (id) => ({
          id,
          name: input.name,
          scope: input.scope,
          token_hash: tokenHash,
          created_at: createdAt,
          last_used_at: null,
        }),
      ),
    ))!;
    this.byHash.clear(tokenHash);
    return { id, name: input.name, scope: input.scope, created_at: createdAt, last_used_at: null, token };
  }

  async list(): Promise<ApiTokenView[]> {
    const rows = await this.database.db
      .selectFrom('api_tokens')
      .select(['id', 'name', 'scope', 'created_at', 'last_used_at'])
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map((row) => ({ ...row, scope: row.scope as TokenScope }));
  }

  /** Revokes at once on this instance; other instances drop their cached lookup within TOKEN_CACHE_MS. */
  async revoke(id: string): Promise<void> {
    const row = await this.database.write((db) => db.deleteFrom('api_tokens').where('id', '=', id).returning('token_hash').executeTakeFirst());
    if (!row) throw notFound('Token', id);
    this.byHash.clear(row.token_hash);
    this.touched.delete(row.token_hash);
  }

  /** The credential a presented token stands for, or null (unknown, revoked, or not one of ours). */
  async resolve(token: string): Promise<ApiCredential | null> {
    if (!token.startsWith(PREFIX)) return null;
    const tokenHash = digest(token);
    const row = await this.byHash.get(tokenHash);
    if (!row) return null;
    const nowMs = Date.now();
    const last = this.touched.get(tokenHash) ?? (row.last_used_at ? Date.parse(row.last_used_at) : 0);
    if (last + TOUCH_EVERY_MS <= nowMs) {
      this.touched.set(tokenHash, nowMs);
      await unlessStorageFails(
        this.database.write((db) =>
          db
            .updateTable('api_tokens')
            .set({ last_used_at: new Date(nowMs).toISOString() })
            .where('token_hash', '=', tokenHash)
            .execute(),
        ),
      );
    }
    return { client: `token:${row.id}`, scope: row.scope as TokenScope };
  }

  private async load(tokenHash: string) {
    return (
      (await this.database.db.selectFrom('api_tokens').select(['id', 'scope', 'last_used_at']).where('token_hash', '=', tokenHash).executeTakeFirst()) ?? null
    );
  }
}
