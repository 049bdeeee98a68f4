import { randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Database } from '../db/index.js';
import { now } from '../db/index.js';
import { insertWithNewId, uniqueId } from '../db/index.js';
import { prepare, type Prepared } from '../db/index.js';
import { rotationGraceEnd, validSecrets, type SecretBox } from '../crypto.js';
import type { BotsTable } from '../db/index.js';
import { memoByKey } from '../memo.js';
import { recordExists, recordNotFound } from './errors.js';

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
   * Decrypted secrets by sealed text: the row is still read once per SECRET_CACHE_MS (a rotation or
   * deletion shows at once), but a sealed text seen before is not decrypted again.
   */
  private readonly opened = new LRUCache<string, string>({ max: OPENED_MAX });

  constructor(
    private readonly database: Database,
    private readonly box: SecretBox,
  ) {
    this.encryptedSecrets = prepare(database, ['id'], (db, param) =>
      db.selectFrom('bots').select(['secret_encrypted', 'previous_secret_encrypted', 'previous_secret_expires_at']).where('id', '=', param('id')),
    );
  }

  async create(input: { id?: string; name: string }): Promise<BotWithSecret> {
    return this.afterCommit(
      this.database.transaction(async (trx) => {
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
        if (id === null) throw recordExists('Bot', input.id!);
        return { id, name: input.name, shared_secret: secret };
      }),
    );
  }

  async list(): Promise<BotView[]> {
    return this.database.db.selectFrom('bots').select(['id', 'name', 'created_at', 'previous_secret_expires_at']).orderBy('id').execute();
  }

  async remove(id: string): Promise<void> {
    const result = await this.database.write((db) => db.deleteFrom('bots').where('id', '=', id).executeTakeFirst());
    this.invalidate(id);
    if (Number(result.numDeletedRows) === 0) throw recordNotFound('Bot', id);
  }

  /** A new secret; the current one keeps working for its grace period (`rotationGraceEnd`). */
  async rotate(id: string): Promise<BotWithSecret & { previous_secret_expires_at: string }> {
    return this.afterCommit(
      this.database.transaction(async (trx) => {
        const bot = await trx.selectFrom('bots').select(['id', 'name', 'secret_encrypted']).where('id', '=', id).executeTakeFirst();
        if (!bot) throw recordNotFound('Bot', id);
        const secret = newSecret();
        const expires = rotationGraceEnd(Date.now());
        await trx
          .updateTable('bots')
          .set({ secret_encrypted: this.box.seal(secret), previous_secret_encrypted: bot.secret_encrypted, previous_secret_expires_at: expires })
          .where('id', '=', id)
          .execute();
        return { id, name: bot.name, shared_secret: secret, previous_secret_expires_at: expires };
      }),
    );
  }

  /** Forgets the cached secrets of a bot (its row changed). */
  invalidate(id: string): void {
    this.secrets.clear(id);
  }

  /** Forgets the bot's cached secrets once its change committed: a request read before then cached the row as it was. */
  private async afterCommit<T extends { id: string }>(change: Promise<T>): Promise<T> {
    const bot = await change;
    this.invalidate(bot.id);
    return bot;
  }

  /** The secrets a signature may be made with right now (current, and the previous one within its grace period). */
  async secretsOf(id: string, nowMs = Date.now()): Promise<string[] | null> {
    const bot = await this.secrets.get(id);
    if (!bot) return null;
    return validSecrets(bot.current, bot.previous, bot.previousExpiresMs, nowMs);
  }

  private async loadSecrets(id: string): Promise<{ current: string; previous: string | null; previousExpiresMs: number } | null> {
    const [bot] = (await this.encryptedSecrets.execute(this.database.db, { id })).rows;
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
