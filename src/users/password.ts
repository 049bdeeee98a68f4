import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/**
 * Password hashing: scrypt from Node's own crypto (OpenSSL), so no native add-on to build. The
 * parameters are OWASP's recommended scrypt set with the least memory, N=2^14, r=8, p=5: 16 MiB a
 * hash (docs/security.md, "Passwords").
 */
const SCRYPT_PARAMETERS = { logN: 14, r: 8, p: 5 } as const;
const KEY_BYTES = 32;
const SALT_BYTES = 16;

/** The password rule: NIST SP 800-63B's minimum length; the maximum bounds the work of one sign-in. */
export const PASSWORD_LENGTH = { min: 8, max: 256 } as const;

const PHC = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$/;

function derive(password: string, salt: Buffer, parameters: { logN: number; r: number; p: number }): Promise<Buffer> {
  const N = 2 ** parameters.logN;
  // Node refuses a cost above its default 32 MiB `maxmem`: allow what these parameters need.
  const options: ScryptOptions = { N, r: parameters.r, p: parameters.p, maxmem: 256 * N * parameters.r };
  return new Promise((resolve, reject) => scrypt(password.normalize('NFKC'), salt, KEY_BYTES, options, (error, key) => (error ? reject(error) : resolve(key))));
}

const b64 = (bytes: Buffer) => bytes.toString('base64').replace(/=+$/, '');

/** A new hash of `password`, in the PHC string format, which keeps its parameters: `$scrypt$ln=14,r=8,p=5$<salt>$<key>`. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const { logN, r, p } = SCRYPT_PARAMETERS;
  return `$scrypt$ln=${logN},r=${r},p=${p}$${b64(salt)}$${b64(await derive(password, salt, SCRYPT_PARAMETERS))}`;
}

/** Whether `password` matches `stored` (with the parameters stored with it), compared in constant time. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = PHC.exec(stored);
  if (!parts) return false;
  const [, logN, r, p, salt, key] = parts;
  const expected = Buffer.from(key!, 'base64');
  const actual = await derive(password, Buffer.from(salt!, 'base64'), { logN: Number(logN), r: Number(r), p: Number(p) });
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/** Checked against when a user name is unknown, so a sign-in takes as long whether the name exists or not. */
let decoy: Promise<string> | null = null;
export function decoyHash(): Promise<string> {
  decoy ??= hashPassword(randomBytes(16).toString('base64'));
  return decoy;
}
