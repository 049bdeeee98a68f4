import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';

/**
 * Addresses a webhook may never reach: link-local (169.254.0.0/16, where cloud metadata services
 * live, and fe80::/10). Loopback and private LAN addresses stay allowed: a home automation hub
 * usually lives there.
 */
export function isForbiddenAddress(address: string): boolean {
  const mapped = address.toLowerCase().startsWith('::ffff:') ? address.slice(7) : address;
  if (isIP(mapped) === 4) return mapped.startsWith('169.254.');
  if (isIP(mapped) === 6) return /^fe[89ab][0-9a-f]?:/i.test(mapped);
  return false;
}

export class ForbiddenTargetError extends Error {}

/** DNS lookup that refuses forbidden addresses, so the check holds for the address actually connected. */
const guardedLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, '', 0);
    const list = addresses as unknown as LookupAddress[];
    const allowed = list.filter((entry) => !isForbiddenAddress(entry.address));
    if (allowed.length === 0) return callback(new ForbiddenTargetError(`${hostname} resolves to a link-local address, which webhooks may not reach`), '', 0);
    if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, allowed);
    callback(null, allowed[0]!.address, allowed[0]!.family);
  });
};

export interface PostResult {
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

/** POSTs a body; never throws: a refused target, timeout or socket error comes back as `error`. */
export function postJson(url: string, body: string, headers: Record<string, string>, timeoutMs: number): Promise<PostResult> {
  const started = performance.now();
  const done = (statusCode: number | null, error: string | null): PostResult => ({ statusCode, error, durationMs: Math.round(performance.now() - started) });
  return new Promise((resolve) => {
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      return resolve(done(null, 'invalid URL'));
    }
    const host = target.hostname.replace(/^\[|\]$/g, '');
    if (isIP(host) && isForbiddenAddress(host)) return resolve(done(null, `${host} is a link-local address, which webhooks may not reach`));
    const client = target.protocol === 'https:' ? https : http;
    const request = client.request(
      target,
      { method: 'POST', headers: { ...headers, 'content-length': Buffer.byteLength(body) }, lookup: guardedLookup, timeout: timeoutMs },
      (response) => {
        response.resume(); // the body is not needed; drain it so the socket is freed
        response.on('end', () => resolve(done(response.statusCode ?? null, response.statusCode && response.statusCode >= 400 ? `HTTP ${response.statusCode}` : null)));
        response.on('error', (error) => resolve(done(response.statusCode ?? null, error.message)));
      },
    );
    const timer = setTimeout(() => request.destroy(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
    request.on('timeout', () => request.destroy(new Error(`timed out after ${timeoutMs} ms`)));
    request.on('error', (error: NodeJS.ErrnoException) => resolve(done(null, describe(error))));
    request.on('close', () => clearTimeout(timer));
    request.end(body);
  });
}

function describe(error: NodeJS.ErrnoException): string {
  switch (error.code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ENOTFOUND':
      return 'host not found';
    case 'ECONNRESET':
      return 'connection reset';
    default:
      return error.message;
  }
}
