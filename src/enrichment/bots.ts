import { randomBytes } from 'node:crypto';
import DataLoader from 'dataloader';
import { LRUCache } from 'lru-cache';
import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import { now } from '../db/index.js';
import { insertWithNewId, uniqueId } from '../db/index.js';
import { prepare, type Prepared } from '../db/index.js';
import { ROTATION_GRACE_MS, type SecretBox } from '../crypto.js';
import type { BotsTable } from '../db/index.js';
import { conflict, notFound } from '../errors.js';
import { memoByKey } from '../memo.js';

/**
 * How long decrypted secrets are cached. A rotation or deletion takes effect at once on this instance
 * and within this time on others sharing the database.
 */
export const SECRET_CACHE_MS = 5000;

/** Decrypted secrets kept by their sealed text, at most (the least recently used is dropped first). */
const OPENED_MAX = 10_000;

export interface BotView {
  id: string;
  name: string;
  created_at: string;
  previous_secret_expires_at: string | null;
}

export interface BotWithSecret {
  id: string;
  name: string;
  shared_secret: string;
}

type SealedSecrets = Pick<BotsTable, 'secret_encrypted' | 'previous_secret_encrypted' | 'previous_secret_expires_at'>;

const newSecret = () => 'mss_' + randomBytes(32).toString('base64url');

/** Bots and their shared secrets (generated with a CSPRNG, stored encrypted, shown once). */
export class BotService {
  private readonly secrets = memoByKey(SECRET_CACHE_MS, (id) => this.loadSecrets(id));
  /**
   * Compiled once (db/prepared.ts): with many bots each asking a few times a day, most signed
   * requests find no cached secret, so this runs about once per request.
   */
  private readonly encryptedSecrets: Prepared<SealedSecrets, 'id'>;
  /**
   * PostgreSQL: the rows the cache misses of one event-loop turn need, in one `id = any(...)` query
   * (each query there is a round trip). Only batching: the memo above keeps them for SECRET_CACHE_MS.
   */
  private readonly sealedLoader: DataLoader<string, SealedSecrets | null> | null;
  /**
   * Decrypted secrets by sealed text: the row is still read once per SECRET_CACHE_MS (a rotation or
   * deletion shows at once), but a sealed text seen before is not decrypted again.
   */
  private readonly opened = new LRUCache<string, string>({ max: OPENED_MAX });
  /** Queries that read secrets so far (tests and diagnostics). */
  secretReads = 0;

  constructor(
    private readonly database: Database,
    private readonly box: SecretBox,
  ) {
    this.encryptedSecrets = prepare(database, ['id'], (db, param) =>
      db.selectFrom('bots').select(['secret_encrypted', 'previous_secret_encrypted', 'previous_secret_expires_at']).where('id', '=', param('id')),
    );
    this.sealedLoader = database.dialect === 'postgres' ? this.loaderOfSealedSecrets() : null;
  }

  private loaderOfSealedSecrets(): DataLoader<string, SealedSecrets | null> {
    const sealedOfMany = prepare(this.database, ['ids'], (db, param) =>
      db
        .selectFrom('bots')
        .select(['id', 'secret_encrypted', 'previous_secret_encrypted', 'previous_secret_expires_at'])
        .where('id', '=', sql<string>`any(${param('ids')}::text[])`),
    );
    return new DataLoader(
      async (ids) => {
        this.secretReads++;
        const { rows } = await sealedOfMany.execute(this.database.db, { ids });
        const byId = new Map(rows.map((row) => [row.id, row]));
        return ids.map((id) => byId.get(id) ?? null);
      },
      // The whole turn, not only one microtask run: each socket's request arrives in a callback of its own.
      { cache: false, maxBatchSize: 1000, batchScheduleFn: (run) => setImmediate(run) },
    );
  }

  async create(input: { id?: string; name: string }): Promise<BotWithSecret> {
    return this.database.transaction(async (trx) => {
      const secret = newSecret();
      const sealed = this.box.seal(secret);
      const id = await insertWithNewId(
        trx,
        'bots',
        input.id,
        () => uniqueId(trx, 'bots', input.name, 'bot'),
        (id) => ({
          id,
          name: input.name,
          secret_encrypted: sealed,
          previous_secret_encrypted: null,
          previous_secret_expires_at: null,
          created_at: now(),
        }),
      );
      if (id === null) throw conflict(`Bot "${input.id}" already exists`);
      return { id, name: input.name, shared_secret: secret };
    });
  }

  async list(): Promise<BotView[]> {
    return this.database.db.selectFrom('bots').select(['id', 'name', 'created_at', 'previous_secret_expires_at']).orderBy('id').execute();
  }

  async remove(id: string): Promise<void> {
    const result = await this.database.write((db) => db.deleteFrom('bots').where('id', '=', id).executeTakeFirst());
    this.invalidate(id);
    if (Number(result.numDeletedRows) === 0) throw notFound('Bot', id);
  }

  /** A new secret; the current one keeps working for ROTATION_GRACE_MS. */
  async rotate(id: string): Promise<BotWithSecret & { previous_secret_expires_at: string }> {
    return this.database.transaction(async (trx) => {
      const bot = await trx.selectFrom('bots').select(['id', 'name', 'secret_encrypted']).where('id', '=', id).executeTakeFirst();
      if (!bot) throw notFound('Bot', id);
      const secret = newSecret();
      const expires = new Date(Date.now() + ROTATION_GRACE_MS).toISOString();
      await trx
        .updateTable('bots')
        .set({ secret_encrypted: this.box.seal(secret), previous_secret_encrypted: bot.secret_encrypted, previous_secret_expires_at: expires })
        .where('id', '=', id)
        .execute();
      this.invalidate(id);
      return { id, name: bot.name, shared_secret: secret, previous_secret_expires_at: expires };
    });
  }

  /** Forgets the cached secrets of a bot (its row changed). */
  invalidate(id: string): void {
    this.secrets.clear(id);
  }

  /** The secrets a signature may be made with right now (current, and the previous one within its grace period). */
  async secretsOf(id: string, nowMs = Date.now()): Promise<string[] | null> {
    const bot = await this.secrets.get(id);
    if (!bot) return null;
    return bot.previousExpiresMs > nowMs ? [bot.current, bot.previous!] : [bot.current];
  }

  private async loadSecrets(id: string): Promise<{ current: string; previous: string | null; previousExpiresMs: number } | null> {
    if (!this.sealedLoader) this.secretReads++;
    const bot = this.sealedLoader ? await this.sealedLoader.load(id) : (await this.encryptedSecrets.execute(this.database.db, { id })).rows[0];
    if (!bot) return null;
    const previous = bot.previous_secret_encrypted && bot.previous_secret_expires_at ? bot.previous_secret_encrypted : null;
    return {
      current: this.open(bot.secret_encrypted),
      previous: previous ? this.open(previous) : null,
      previousExpiresMs: previous ? Date.parse(bot.previous_secret_expires_at!) : 0,
    };
  }

  private open(sealed: string): string {
    let secret = this.opened.get(sealed);
    if (secret === undefined) {
      secret = this.box.open(sealed);
      this.opened.set(sealed, secret);
    }
    return secret;
  }
}
