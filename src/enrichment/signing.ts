import { createHmac, hash, timingSafeEqual } from 'node:crypto';

/**
 * Bot request signing (docs/enrichment.md), as plain functions:
 *
 *   signature = hex(HMAC-SHA256(utf8(shared_secret),
 *     "v1\n" + METHOD + "\n" + PATH_AND_QUERY + "\n" + TIMESTAMP + "\n" + NONCE + "\n" + hex(sha256(raw body))))
 *
 * sent as `X-Bot-Signature: v1=<hex>`; several space-separated entries are allowed (e.g. during a
 * secret rotation a client may sign with both secrets).
 */
const SIGNATURE_VERSION = 'v1';
export const MAX_CLOCK_SKEW_SECONDS = 300;
/**
 * A signed request stays fresh for up to 2 x skew + 1 s of server time (a bot clock 300 s fast, then
 * 300 s slow, compared in whole seconds): its nonce must be remembered longer than that, or the
 * request can be sent again once its nonce is forgotten.
 */
export const NONCE_TTL_SECONDS = 2 * MAX_CLOCK_SKEW_SECONDS + 60;
export const NONCE_PATTERN = /^[A-Za-z0-9_-]{16,64}$/;

export interface SignedParts {
  method: string;
  pathAndQuery: string;
  timestamp: string;
  nonce: string;
  body: Buffer | string;
}

export function stringToSign(parts: SignedParts): string {
  const bodyHash = hash('sha256', parts.body, 'hex');
  return [SIGNATURE_VERSION, parts.method.toUpperCase(), parts.pathAndQuery, parts.timestamp, parts.nonce, bodyHash].join('\n');
}

const hmac = (secret: string, message: string) => createHmac('sha256', Buffer.from(secret, 'utf8')).update(message);

export function sign(secret: string, parts: SignedParts): string {
  return hmac(secret, stringToSign(parts)).digest('hex');
}

export function signatureHeader(secret: string, parts: SignedParts): string {
  return `${SIGNATURE_VERSION}=${sign(secret, parts)}`;
}

/** The hex digests of every `v1=` entry in the header (other versions are ignored). */
export function parseSignatures(header: string): string[] {
  return header
    .split(' ')
    .filter((entry) => entry.startsWith(`${SIGNATURE_VERSION}=`))
    .map((entry) => entry.slice(SIGNATURE_VERSION.length + 1))
    .filter((hex) => /^[0-9a-f]{64}$/.test(hex));
}

/**
 * True when any offered signature matches any candidate secret. Every pair is compared in constant
 * time and the loop never exits early, so timing reveals neither which entry matched nor whether one did.
 */
export function verifySignatures(secrets: string[], parts: SignedParts, offered: string[]): boolean {
  const message = stringToSign(parts);
  const candidates = offered.map((hex) => Buffer.from(hex, 'hex'));
  let matched = false;
  for (const secret of secrets) {
    const expected = hmac(secret, message).digest();
    for (const candidate of candidates) {
      if (timingSafeEqual(expected, candidate)) matched = true;
    }
  }
  return matched;
}

/** True when the unix-seconds timestamp is within the allowed skew of `nowMs`, in either direction. */
export function timestampFresh(timestamp: string, nowMs: number): boolean {
  if (!/^\d{1,12}$/.test(timestamp)) return false;
  return Math.abs(Number(timestamp) - Math.floor(nowMs / 1000)) <= MAX_CLOCK_SKEW_SECONDS;
}
