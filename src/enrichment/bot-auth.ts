import { randomBytes } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { Database, Db } from '../db/index.js';
import { prepare, type Prepared } from '../db/index.js';
import { addressKey, BOT_CHALLENGE, type ProblemError, unauthorized } from '../http/index.js';
import { ID_PATTERN } from '../ids.js';
import type { BotService } from './bots.js';
import { nonceStoreUnavailable } from './errors.js';
import { MAX_CLOCK_SKEW_SECONDS, NONCE_PATTERN, NONCE_TTL_SECONDS, parseSignatures, timestampFresh, verifySignatures } from './signing.js';

/**
 * The nonces of signed requests, kept NONCE_TTL_SECONDS, in the database whatever else is configured:
 * the one store every instance of an installation shares and that survives restarts (of the service
 * and of Redis, which may keep nothing on disk, or be flushed).
 */
export class DatabaseNonceStore {
  // Inserted, or an expired entry taken over: first use. A live entry: replay (no row returned).
  private readonly record: Prepared<{ key: string }, 'key' | 'expires' | 'now'>;

  constructor(private readonly database: Database) {
    this.record = prepare(database, ['key', 'expires', 'now'], (db, param) =>
      db
        .insertInto('nonces')
        .values({ key: param('key'), expires_at: param('expires') })
        .onConflict((oc) =>
          oc
            .column('key')
            .doUpdateSet({ expires_at: param('expires') })
            .where('nonces.expires_at', '<', param('now')),
        )
        .returning('key'),
    );
  }

  /** The row a first use of `key` at `nowMs` writes, and the time before which a stored one is live. */
  private entry(key: string, nowMs = Date.now()): { key: string; now: string; expires: string } {
    return { key, now: new Date(nowMs).toISOString(), expires: new Date(nowMs + NONCE_TTL_SECONDS * 1000).toISOString() };
  }

  /** Records `key` in a write of its own; false for a replay (a live entry). */
  firstUse(key: string): Promise<boolean> {
    return this.database.write((db) => this.firstUseWithin(db, key));
  }

  /** `firstUse` as part of a transaction (`trx`), so a request that is refused later records nothing. */
  async firstUseWithin(trx: Db, key: string): Promise<boolean> {
    const { rows } = await this.record.execute(trx, this.entry(key));
    return rows.length > 0;
  }

  /**
   * Deletes the nonces expired a whole lifetime ago: an instance whose clock runs ahead of the others
   * (by less than that) must not delete a nonce they still refuse a replay by. Expired ones kept until
   * then are taken over by their next first use.
   */
  async purgeExpired(nowMs = steadyNow()): Promise<void> {
    const before = new Date(nowMs - NONCE_TTL_SECONDS * 1000).toISOString();
    await this.database.write((db) => db.deleteFrom('nonces').where('expires_at', '<', before).execute());
  }
}

/**
 * The wall clock, but never ahead of the time that has passed since the process started: a clock
 * stepped forward (and back again) must not purge nonces whose requests are fresh again afterwards.
 * Behind it (a step back, a suspend) purges later, which only keeps nonces longer.
 */
const steadyNow = (): number => Math.min(Date.now(), performance.timeOrigin + performance.now());

const BOT_HEADERS = ['x-bot-id', 'x-bot-timestamp', 'x-bot-nonce', 'x-bot-signature'] as const;

const header = (request: FastifyRequest, name: string) => {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
};

/**
 * Verifies a bot-signed request. Every failure is the same opaque 401: missing header, unknown bot,
 * stale timestamp, bad signature or replayed nonce. An unknown bot id is checked against a throwaway
 * secret so the response time does not reveal which bot ids exist. Checking the signature writes
 * nothing; the nonce is recorded only after it is valid (and after the bot's rate limit), so
 * unauthenticated or refused requests cannot fill the store.
 */
export class BotAuthenticator {
  private readonly dummySecret = randomBytes(32).toString('base64url');

  constructor(
    private readonly bots: BotService,
    private readonly nonces: DatabaseNonceStore,
  ) {}

  /**
   * The caller gets one opaque 401 whatever failed (nothing to learn from it); the reason (one of a
   * fixed set: what the caller sent goes in `detail`) goes to the server log for whoever runs the
   * bot, without the signature or any secret, a line per client and reason a minute. `knownBot` when
   * the bot exists: its refusals are counted apart from those of other bots on the same host.
   */
  private refused(request: FastifyRequest, reason: string, botId?: string, knownBot = false, detail: Record<string, string> = {}): ProblemError {
    const client = addressKey(request.ip) + (knownBot ? ` bot:${botId}` : '');
    // The client's address is in no other line at info (the access log is debug's).
    request.server.throttledLog.write(request.log, client, 'info', { bot_id: botId, ip: request.ip, reason, ...detail }, `bot request refused: ${reason}`);
    return unauthorized(BOT_CHALLENGE);
  }

  /** A verified request refused afterwards (its nonce seen before, here or in the enrichment request's own write). */
  readonly refusedBot = (request: FastifyRequest, reason: string): ProblemError => this.refused(request, reason, request.botId, true);

  /** The bot that signed the request, and its nonce's key in the store (not yet recorded). */
  async verify(request: FastifyRequest): Promise<{ botId: string; nonce: string }> {
    const botId = header(request, 'x-bot-id');
    const timestamp = header(request, 'x-bot-timestamp');
    const nonce = header(request, 'x-bot-nonce');
    const signatureHeader = header(request, 'x-bot-signature');
    const missing = BOT_HEADERS.filter((name) => !header(request, name));
    if (missing.length) throw this.refused(request, `missing ${missing.join(', ')}`);
    if (!ID_PATTERN.test(botId!)) throw this.refused(request, 'malformed X-Bot-Id');
    if (!NONCE_PATTERN.test(nonce!)) throw this.refused(request, 'malformed X-Bot-Nonce', botId);

    const secrets = (await this.bots.secretsOf(botId!)) ?? [this.dummySecret];
    const known = secrets[0] !== this.dummySecret;
    const parts = { method: request.method, pathAndQuery: request.url, timestamp: timestamp!, nonce: nonce!, body: request.rawBody ?? Buffer.alloc(0) };
    const valid = verifySignatures(secrets, parts, parseSignatures(signatureHeader!));
    const fresh = timestampFresh(timestamp!, Date.now());
    if (!known || !valid || !fresh) {
      throw this.refused(
        request,
        !known ? 'unknown bot' : !valid ? 'signature does not match' : `timestamp more than ${MAX_CLOCK_SKEW_SECONDS} s from the server clock`,
        botId,
        known,
        known && valid ? { timestamp: timestamp!.slice(0, 20) } : {},
      );
    }
    return { botId: botId!, nonce: `${botId}:${nonce}` };
  }

  /** Records a verified request's nonce; a replay is refused. */
  async recordNonce(request: FastifyRequest, nonce: string): Promise<void> {
    let firstUse: boolean;
    try {
      firstUse = await this.nonces.firstUse(nonce);
    } catch (error) {
      // Without the nonce store a replay cannot be ruled out: refuse, but say why.
      request.server.throttledLog.write(request.log, 'nonces', 'warn', { err: error }, 'nonce store unavailable: bot requests are refused');
      throw nonceStoreUnavailable();
    }
    if (!firstUse) throw this.refusedBot(request, 'nonce already used');
  }
}
