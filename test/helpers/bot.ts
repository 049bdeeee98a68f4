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

/**
 * Signs and sends a bot request exactly as a bot author would (docs/enrichment.md): injected into
 * `target`, or over HTTP when it is a running service's base URL.
 */
export async function botRequest(
  target: FastifyInstance | string,
  bot: { id: string; shared_secret: string },
  method: string,
  url: string,
  body?: unknown,
  options: SignOptions = {},
) {
  const raw = body === undefined ? '' : JSON.stringify(body);
  const timestamp = String(options.timestamp ?? Math.floor(Date.now() / 1000));
  const nonce = options.nonce ?? randomBytes(16).toString('base64url');
  const parts = { method, pathAndQuery: url, timestamp, nonce, body: raw };
  const signature = (options.secrets ?? [bot.shared_secret]).map((secret) => signatureHeader(secret, parts)).join(' ');
  const request = {
    method: options.tamper?.method ?? method,
    url: options.tamper?.url ?? url,
    headers: {
      'x-bot-id': bot.id,
      'x-bot-timestamp': timestamp,
      'x-bot-nonce': nonce,
      'x-bot-signature': signature,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...options.headers,
    },
    payload: body !== undefined ? (options.tamper?.body ?? raw) : undefined,
  };
  if (typeof target === 'string') {
    const response = await fetch(target + request.url, { method: request.method, headers: request.headers, body: request.payload });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: Object.fromEntries(response.headers) };
  }
  const response = await target.inject({
    method: request.method as 'POST',
    url: request.url,
    headers: request.headers,
    ...(request.payload !== undefined ? { payload: request.payload } : {}),
  });
  return { status: response.statusCode, body: response.body ? JSON.parse(response.body) : undefined, headers: response.headers };
}
