import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * How long a rotated-out secret (a bot's, the webhook's) keeps working, so the other side can be
 * redeployed with the new one without downtime.
 */
export const ROTATION_GRACE_MS = 24 * 60 * 60 * 1000;

/** When a secret replaced at `nowMs` stops working (ISO 8601, as stored). */
export const rotationGraceEnd = (nowMs: number): string => new Date(nowMs + ROTATION_GRACE_MS).toISOString();

/** The secrets a signature may be made with at `nowMs`: the current one, and the one it replaced until its grace ends. */
export function validSecrets(current: string, previous: string | null, previousExpiresMs: number, nowMs: number): string[] {
  return previous && previousExpiresMs > nowMs ? [current, previous] : [current];
}

/**
 * Encryption at rest for secrets (bot shared secrets, MQTT password, webhook secret, CA certificate):
 * AES-256-GCM with a random 96-bit IV per value, stored as `v1.<iv>.<tag>.<ciphertext>` (base64url).
 */
export class SecretBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('SecretBox needs a 32-byte key');
  }

  seal(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return ['v1', iv, cipher.getAuthTag(), ciphertext].map((part) => (typeof part === 'string' ? part : part.toString('base64url'))).join('.');
  }

  open(sealed: string): string {
    const [version, iv, tag, ciphertext] = sealed.split('.');
    if (version !== 'v1' || !iv || !tag || ciphertext === undefined) throw new Error('Not a sealed secret');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8');
  }
}
