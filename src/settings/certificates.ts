/** The MQTT client certificate and key: reading them, and the rules a save or a test checks (docs/mqtt.md, "Client certificates"). */
import { createPrivateKey, KeyObject, X509Certificate } from 'node:crypto';
import type { FieldError } from '../errors.js';
import type { IntegrationPatch, IntegrationSettings } from './model.js';

const PEM_BEGIN = /-----BEGIN ([^-]*)-----/g;
const CERTIFICATE_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;
const ENCRYPTED_KEY = /-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: 4,ENCRYPTED/;

/**
 * The certificates of a PEM text, the client's own first (a chain may follow), or why it is not one.
 * Text around the blocks is allowed (`openssl pkcs12` writes "Bag Attributes" before each); a block
 * of anything else is not, so a key pasted with the certificate is never kept outside `client_key`.
 */
function readCertificates(pem: string): X509Certificate[] | string {
  const labels = [...pem.matchAll(PEM_BEGIN)].map(([, label]) => label);
  if (!labels.includes('CERTIFICATE')) return 'must be a PEM certificate (-----BEGIN CERTIFICATE-----)';
  if (labels.some((label) => label !== 'CERTIFICATE')) return 'must hold only certificates (the private key goes in client_key)';
  const blocks = [...pem.matchAll(CERTIFICATE_BLOCK)];
  if (blocks.length !== labels.length) return 'is not a readable PEM certificate';
  try {
    return blocks.map(([block]) => new X509Certificate(block));
  } catch {
    return 'is not a readable PEM certificate';
  }
}

/** What the settings view says about a stored client certificate: its subject and when it expires. */
export function certificateSummary(pem: string): { subject: string; expires_at: string } | null {
  const certificates = pem ? readCertificates(pem) : null;
  if (!Array.isArray(certificates)) return null;
  const [own] = certificates;
  return { subject: own!.subject.split('\n').join(', '), expires_at: new Date(own!.validTo).toISOString() };
}

/**
 * The most key-derivation rounds an encrypted key may ask for. Unlocking runs on the event loop, and
 * a key can ask for 2^31; tools write 2,048 (OpenSSL) to 600,000.
 */
export const MAX_KEY_ROUNDS = 1_000_000;

/** DER of the password-based schemes whose parameters are `SEQUENCE { salt OCTET STRING, rounds INTEGER, ... }`: PBKDF2 and PBES1 (PKCS #5), PKCS #12 PBE. */
const ROUNDS_SCHEMES = [/^2a864886f70d0105(0[1346abc])$/, /^2a864886f70d010c01/];

/** One DER element at `offset`: its tag and where its content starts and ends; null past the end. */
function derElement(der: Buffer, offset: number): { tag: number; start: number; end: number } | null {
  let length = der[offset + 1];
  let start = offset + 2;
  if (der[offset] === undefined || length === undefined) return null;
  if (length & 0x80) {
    const bytes = length & 0x7f;
    if (bytes > 3) return null;
    length = der.subarray(start, start + bytes).reduce((total, byte) => total * 256 + byte, 0);
    start += bytes;
  }
  return start + length > der.length ? null : { tag: der[offset]!, start, end: start + length };
}

/** The most rounds any key derivation of an encrypted PKCS #8 key asks for (0 when none says: scrypt's cost OpenSSL bounds itself). */
function keyDerivationRounds(pem: string): number {
  const body = /-----BEGIN ENCRYPTED PRIVATE KEY-----([\s\S]*?)-----END ENCRYPTED PRIVATE KEY-----/.exec(pem)?.[1];
  if (!body) return 0;
  const der = Buffer.from(body.replace(/\s/g, ''), 'base64');
  let most = 0;
  for (let offset = 0; offset < der.length; offset++) {
    const oid = der[offset] === 0x06 ? derElement(der, offset) : null;
    if (!oid || !ROUNDS_SCHEMES.some((scheme) => scheme.test(der.subarray(oid.start, oid.end).toString('hex')))) continue;
    const params = derElement(der, oid.end);
    const salt = params?.tag === 0x30 ? derElement(der, params.start) : null;
    const rounds = salt?.tag === 0x04 ? derElement(der, salt.end) : null;
    if (rounds?.tag !== 0x02) continue;
    const value = rounds.end - rounds.start > 6 ? Infinity : der.subarray(rounds.start, rounds.end).reduce((total, byte) => total * 256 + byte, 0);
    most = Math.max(most, value);
  }
  return most;
}

/** A private key from PEM, unlocked with the passphrase when it is encrypted; a field error otherwise. */
function readKey(pem: string, passphrase: string): KeyObject | FieldError {
  const encrypted = ENCRYPTED_KEY.test(pem);
  if (encrypted && !passphrase) return { path: '/mqtt/client_key_passphrase', message: 'is required: the client key is encrypted' };
  if (keyDerivationRounds(pem) > MAX_KEY_ROUNDS)
    return {
      path: '/mqtt/client_key',
      message: `is encrypted with more than ${MAX_KEY_ROUNDS.toLocaleString('en')} key derivation rounds: encrypt it with fewer (openssl pkcs8 -topk8 -iter 100000), or send it unencrypted (it is stored encrypted)`,
    };
  try {
    return createPrivateKey({ key: pem, format: 'pem', ...(encrypted ? { passphrase } : {}) });
  } catch {
    return encrypted
      ? { path: '/mqtt/client_key_passphrase', message: 'does not decrypt the client key' }
      : { path: '/mqtt/client_key', message: 'must be a PEM private key (-----BEGIN PRIVATE KEY-----)' };
  }
}

/**
 * Checks the client certificate and key a save or a test would use (`mqtt`, the patch merged in),
 * and gives the key to keep: unencrypted PKCS #8, so the passphrase is used once and never stored.
 * Expiry is checked for a certificate the patch brings, not a stored one: a certificate that expires
 * later must not block saving other settings (the broker's refusal says so in the status).
 */
export function checkClientCertificate(
  mqtt: IntegrationSettings['mqtt'],
  patch: IntegrationPatch['mqtt'],
  nowMs: number,
): { client_key: string; errors: FieldError[] } {
  const errors: FieldError[] = [];
  const passphrase = patch?.client_key_passphrase ?? '';
  if (passphrase && !patch?.client_key)
    errors.push({ path: '/mqtt/client_key_passphrase', message: 'is only used with the client_key it unlocks, sent in the same request' });
  if (mqtt.client_cert && !mqtt.client_key) errors.push({ path: '/mqtt/client_key', message: 'is required with a client certificate' });
  if (mqtt.client_key && !mqtt.client_cert) errors.push({ path: '/mqtt/client_cert', message: 'is required with a client key' });
  const certificates = mqtt.client_cert ? readCertificates(mqtt.client_cert) : null;
  if (typeof certificates === 'string') errors.push({ path: '/mqtt/client_cert', message: certificates });
  const own = Array.isArray(certificates) ? certificates[0]! : null;
  if (own && patch?.client_cert && Date.parse(own.validTo) <= nowMs)
    errors.push({ path: '/mqtt/client_cert', message: `has expired (${new Date(own.validTo).toISOString()})` });
  if (!mqtt.client_key) return { client_key: '', errors };
  const key = readKey(mqtt.client_key, passphrase);
  if (!(key instanceof KeyObject)) return { client_key: mqtt.client_key, errors: [...errors, key] };
  if (own && !own.checkPrivateKey(key)) errors.push({ path: '/mqtt/client_key', message: 'does not match the client certificate' });
  return { client_key: key.export({ type: 'pkcs8', format: 'pem' }).toString(), errors };
}
