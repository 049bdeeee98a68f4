import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { signatureHeader } from '../../src/enrichment/signing.js';

export interface SignOptions {
  timestamp?: number;
  nonce?: string;
  /** Sign with these secrets (several `v1=` entries); default: the bot's secret. */
  secrets?: string[];
  /** Change what is sent after signing (to prove tampering is caught). */
  tamper?: { method?: string; url?: string; body?: string };
  headers?: Record<string, string>;
}

/** Signs and sends a bot request exactly as a bot author would (docs/enrichment.md). */
export async function botRequest(app: FastifyInstance, bot: { id: string; shared_secret: string }, method: string, url: string, body?: unknown, options: SignOptions = {}) {
  const raw = body === undefined ? '' : JSON.stringify(body);
  const timestamp = String(options.timestamp ?? Math.floor(Date.now() / 1000));
  const nonce = options.nonce ?? randomBytes(16).toString('base64url');
  const parts = { method, pathAndQuery: url, timestamp, nonce, body: raw };
  const signature = (options.secrets ?? [bot.shared_secret]).map((secret) => signatureHeader(secret, parts)).join(' ');
  const response = await app.inject({
    method: (options.tamper?.method ?? method) as 'POST',
    url: options.tamper?.url ?? url,
    headers: {
      'x-bot-id': bot.id,
      'x-bot-timestamp': timestamp,
      'x-bot-nonce': nonce,
      'x-bot-signature': signature,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...options.headers,
    },
    ...(body !== undefined ? { payload: options.tamper?.body ?? raw } : {}),
  });
  return { status: response.statusCode, body: response.body ? JSON.parse(response.body) : undefined, headers: response.headers };
}
