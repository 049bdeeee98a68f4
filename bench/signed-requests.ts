import type autocannon from 'autocannon';
import { randomBytes } from 'node:crypto';
import { signatureHeader } from '../src/enrichment/signing.js';
import { DAILY_QUOTA } from '../src/enrichment/quota.js';

export type Bot = { id: string; shared_secret: string };

/** Matches seeded per bot, each requested once: a bot's daily quota. */
export const PER_BOT = DAILY_QUOTA;

/**
 * What the load generator signs (plain data, so it crosses to the generator's process): the bots,
 * the first request's number, a secret no bot has for a bad signature, and the path when not the
 * enrichment endpoint's.
 */
export interface SignedPlan {
  bots: Bot[];
  first: number;
  secret?: string;
  path?: string;
}

/**
 * A request generator signing every request as a bot would (the same client cost for both targets).
 * Consecutive requests come from different bots, as many bots' requests would (one bot's five are
 * spread over the run, not sent at once), counting from request `first`; each match once. The first
 * `ahead` requests are signed before the run starts (their timestamps stay fresh for minutes): a
 * generator signing as it sends was the bottleneck of a fast target on a slow machine (README.md,
 * fourteenth session); later ones are signed as they are sent.
 */
export function signedRequests({ bots, first, secret, path = '/api/request-enrichment' }: SignedPlan, ahead = 0) {
  let counter = first;
  const sign = () => {
    const index = counter++;
    const botIndex = index % bots.length;
    const bot = bots[botIndex]!;
    const body = JSON.stringify({ match_id: `m${botIndex * PER_BOT + (Math.floor(index / bots.length) % PER_BOT)}` });
    const timestamp = String(Math.floor(Date.now() / 1000));
    const nonce = randomBytes(16).toString('hex');
    const signature = signatureHeader(secret ?? bot.shared_secret, { method: 'POST', pathAndQuery: '/api/request-enrichment', timestamp, nonce, body });
    return {
      body,
      headers: { 'content-type': 'application/json', 'x-bot-id': bot.id, 'x-bot-timestamp': timestamp, 'x-bot-nonce': nonce, 'x-bot-signature': signature },
    };
  };
  const signed = Array.from({ length: ahead }, sign);
  let next = 0;
  return {
    method: 'POST' as const,
    path,
    setupRequest: (request: autocannon.Request) => ({ ...request, ...(next < signed.length ? signed[next++]! : sign()) }),
  };
}
