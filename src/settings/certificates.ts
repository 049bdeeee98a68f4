/** The MQTT client certificate and key: reading them, and the rules a save or a test checks (docs/mqtt.md, "Client certificates"). */
import { createPrivateKey, KeyObject, X509Certificate } from 'node:crypto';
import type { FieldError } from '../http/problem.js';
import type { IntegrationPatch, IntegrationSettings } from './model.js';

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----/g;
const ENCRYPTED_KEY = /-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: 4,ENCRYPTED/;

/**
 * The certificates of a PEM text, the client's own first (a chain may follow), or why it is not one.
 * Text around the blocks is allowed (`openssl pkcs12` writes "Bag Attributes" before each); a block
 * of anything else is not, so a key pasted with the certificate is never kept outside `client_key`.
 */
export function readCertificates(pem: string): X509Certificate[] | string {
  const blocks = [...pem.matchAll(PEM_BLOCK)];
  if (!blocks.some(([, label]) => label === 'CERTIFICATE')) return 'must be a PEM certificate (-----BEGIN CERTIFICATE-----)';
  if (blocks.some(([, label]) => label !== 'CERTIFICATE')) return 'must hold only certificates (the private key goes in client_key)';
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

/** A private key from PEM, unlocked with the passphrase when it is encrypted; a field error otherwise. */
function readKey(pem: string, passphrase: string): KeyObject | FieldError {
  const encrypted = ENCRYPTED_KEY.test(pem);
  if (encrypted && !passphrase) return { path: '/mqtt/client_key_passphrase', message: 'is required: the client key is encrypted' };
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
