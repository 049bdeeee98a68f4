import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/**
 * Where the service's own outbound connections (webhook deliveries, the MQTT broker, and the
 * settings tests of both) may never go. Loopback and private LAN addresses stay allowed: a home
 * automation hub usually lives there. What is refused is never a broker or a receiver: link-local
 * (cloud metadata services at 169.254.169.254, fe80::/10), "this host" and unspecified addresses,
 * multicast and reserved space, and two metadata addresses outside those ranges.
 */
const FORBIDDEN_IPV4: Array<[string, number]> = [
  ['0.0.0.0', 8],
  ['169.254.0.0', 16],
  ['100.100.100.200', 32], // Alibaba Cloud metadata, inside the shared 100.64.0.0/10 space (which stays allowed)
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
];
const FORBIDDEN_IPV6: Array<[string, number]> = [
  ['::', 128],
  ['fe80::', 10],
  ['ff00::', 8],
  ['fd00:ec2::254', 128], // AWS instance metadata over IPv6
];

const forbidden = new BlockList();
for (const [address, prefix] of FORBIDDEN_IPV4) {
  forbidden.addSubnet(address, prefix, 'ipv4');
  // The same IPv4 range written as IPv6: mapped (::ffff:a.b.c.d), NAT64 (64:ff9b::a.b.c.d) and the
  // deprecated compatible form (::a.b.c.d; not for 0.0.0.0/8, whose compatible form holds ::1).
  forbidden.addSubnet(`::ffff:${address}`, 96 + prefix, 'ipv6');
  forbidden.addSubnet(`64:ff9b::${address}`, 96 + prefix, 'ipv6');
  if (address !== '0.0.0.0') forbidden.addSubnet(`::${address}`, 96 + prefix, 'ipv6');
}
for (const [address, prefix] of FORBIDDEN_IPV6) forbidden.addSubnet(address, prefix, 'ipv6');

/** True for an IP address (any textual form Node accepts) the service must not connect to. */
export function isForbiddenAddress(address: string): boolean {
  const family = isIP(address);
  return family !== 0 && forbidden.check(address, family === 6 ? 'ipv6' : 'ipv4');
}

const FORBIDDEN_TARGET_MESSAGE =
  'must not point at an address the service may not reach (link-local, multicast or unspecified: cloud metadata services live there)';

/**
 * The host of a URL as the connection will see it, or null if it is no valid host. The URL parser
 * leaves the host of mqtt:// URLs as written, but the system resolver reads `0xa9fea9fe` or
 * `169.254.43518` as 169.254.169.254: parsing the host again under http:// applies the WHATWG IPv4,
 * IPv6 and percent-decoding rules to it.
 */
export function normalizedHost(url: URL): string | null {
  try {
    return new URL(`http://${url.hostname}/`).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return null;
  }
}

/** Why a URL's host is one the service can never connect to; null if it may be. */
function forbiddenHostError(url: URL): string | null {
  const host = normalizedHost(url);
  if (host === null) return 'must name a valid host name or address';
  return isForbiddenAddress(host) ? FORBIDDEN_TARGET_MESSAGE : null;
}

/**
 * The URL, or why `value` is not one. The URL parser silently drops tabs and newlines, so spaces and
 * control characters are refused first: a stored URL must be exactly the text that was checked.
 */
function parseTargetUrl(value: string, example: string): URL | string {
  // eslint-disable-next-line no-control-regex -- control characters are exactly what this refuses
  if (/[\u0000-\u0020\u007f]/.test(value)) return 'must not contain spaces or control characters';
  try {
    return new URL(value);
  } catch {
    return `must be a URL like ${example}`;
  }
}

/**
 * The one webhook target policy, applied when the URL is saved, when it is tested and before every
 * delivery: why the service would never POST to `value`, or null. Only the address a name resolves
 * to is left to the delivery (`guardedLookup`).
 */
export function webhookTargetError(value: string): string | null {
  const url = parseTargetUrl(value, 'https://host/path');
  if (typeof url === 'string') return url;
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must use http:// or https://';
  if (!url.hostname) return 'must name a host';
  // Nothing listens on port 0: such a URL could be saved but never delivered to.
  if (url.port === '0') return 'port must be 1..65535';
  if (url.username || url.password) return 'must not contain credentials';
  return forbiddenHostError(url);
}

/**
 * Why the MQTT broker at `value` may never be connected to, or null: the scheme and port the
 * connection needs, no credentials in the URL (they have fields of their own), an allowed host.
 */
export function brokerTargetError(value: string): string | null {
  const url = parseTargetUrl(value, 'mqtt://host:1883');
  if (typeof url === 'string') return url;
  if (!BROKER_SCHEMES.includes(url.protocol)) return 'must use mqtt://, mqtts://, ws:// or wss://';
  if (!url.hostname) return 'must name a host';
  // Read the port from the text: URL drops a default one (wss://host:443 has url.port === '').
  const explicitPort = /^[a-z]+:\/\/(?:[^@/?#]*@)?(?:\[[^\]]*\]|[^/:?#]*):(\d+)(?:[/?#]|$)/i.exec(value)?.[1];
  if (!explicitPort) return 'must name a port (1..65535), e.g. mqtt://host:1883';
  const port = Number(explicitPort);
  if (!(port >= 1 && port <= 65535)) return 'port must be 1..65535';
  if (url.username || url.password) return 'must not contain credentials: use the username and password fields';
  return forbiddenHostError(url);
}

const BROKER_SCHEMES = ['mqtt:', 'mqtts:', 'ws:', 'wss:'];

/** A connection the policy refused: `target` is the address, or the name that resolved only to such. */
export class ForbiddenTargetError extends Error {
  readonly code = 'EFORBIDDENTARGET';
  constructor(target: string, resolved = false) {
    super(`${target} ${resolved ? 'resolves only to addresses' : 'is an address'} the service may not reach (link-local, multicast or unspecified)`);
  }
}

/**
 * DNS lookup that drops forbidden addresses, so the check holds for the address actually connected
 * (a name that resolves to 169.254.169.254, or changes its answer between a check and the connect).
 */
export const guardedLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, '', 0);
    const allowed = (addresses as unknown as LookupAddress[]).filter((entry) => !isForbiddenAddress(entry.address));
    if (allowed.length === 0) return callback(new ForbiddenTargetError(hostname, true), '', 0);
    if ((options as { all?: boolean }).all) return (callback as unknown as (error: null, addresses: LookupAddress[]) => void)(null, allowed);
    callback(null, allowed[0]!.address, allowed[0]!.family);
  });
};

const UNTRUSTED_CERTIFICATE = [
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
];

/**
 * What went wrong in a TLS handshake, in words a user can act on, or null if `error` is not a TLS
 * failure. Never the raw message: it can carry the names in a foreign host's certificate.
 */
export function describeTlsError(error: Error & { code?: string | number }): string | null {
  const code = String(error.code ?? '');
  if (UNTRUSTED_CERTIFICATE.includes(code)) return 'TLS error: the certificate is not trusted (self-signed or an unknown CA): add its CA certificate';
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') return 'TLS error: the certificate does not name this host';
  if (code === 'CERT_HAS_EXPIRED') return 'TLS error: the certificate has expired';
  // OpenSSL's "wrong version number": what answered is not TLS (a plain HTTP or MQTT port).
  if (/wrong version number|packet length too long/i.test(error.message))
    return 'TLS error: that port does not speak TLS; for a plain port use http:// (webhook) or mqtt:// (broker)';
  if (code.startsWith('ERR_TLS') || code.includes('CERT') || code === 'EPROTO' || /certificate|SSL|TLS/i.test(error.message))
    return 'TLS error: the handshake failed';
  return null;
}
