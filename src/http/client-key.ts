import { isIPv4, isIPv6 } from 'node:net';
import type { FastifyRequest } from 'fastify';

/** Whom a request counts against (its streams, its share of the storage budget): its bearer token (`token:<id>`), else its address. */
export function requestClient(request: FastifyRequest): string {
  return request.tokenClient ?? addressKey(request.ip);
}

/**
 * Who a client is, by its address: its rate-limit bucket and its line in the throttled log. An IPv6
 * client is keyed by its /64: one subscriber gets a whole /64 (often more), so keying by full address
 * would let it rotate through 2^64 fresh buckets (or log lines).
 * IPv4-mapped IPv6 (`::ffff:192.0.2.1`, `::ffff:c000:201`) is the IPv4 address it carries.
 */
export function addressKey(ip: string): string {
  // Most clients: isIPv6's pattern is far costlier than isIPv4's, and this runs on every request.
  if (isIPv4(ip)) return `ip:${ip}`;
  if (isIPv6(ip)) {
    const mapped = /^::ffff:(?:(\d+\.\d+\.\d+\.\d+)|([\da-f]{1,4}):([\da-f]{1,4}))$/i.exec(ip);
    if (mapped?.[1]) return `ip:${mapped[1]}`;
    if (mapped) return `ip:${quadOf(mapped[2]!, mapped[3]!)}`;
    return `ip6:${prefix64(ip.split('%', 1)[0]!)}::/64`;
  }
  // What a proxy in TRUST_PROXY wrote, if not a bare address: with a port (`192.0.2.1:40001`,
  // `[2001:db8::1]:443`, which some proxies write) it is the address; anything else is one client,
  // never a fresh bucket per spelling.
  const withPort = /^(?:(\d+\.\d+\.\d+\.\d+)(?::\d+)?|\[([^\]]+)\](?::\d+)?)$/.exec(ip);
  const address = withPort?.[1] ?? withPort?.[2];
  if (address !== undefined && (isIPv4(address) || isIPv6(address))) return addressKey(address);
  return 'ip:unparsed';
}

/**
 * The first four 16-bit groups of a valid IPv6 address, `::` expanded, in lowercase without leading
 * zeros. An embedded IPv4 tail (`::1.2.3.4`) counts as two groups; it is never among the first four
 * unless `::` stands before it.
 */
function prefix64(address: string): string {
  const gap = address.indexOf('::');
  const left = gap === -1 ? address.split(':') : gap === 0 ? [] : address.slice(0, gap).split(':');
  const groups = left.slice(0, 4);
  if (groups.length < 4) {
    const tail = address.slice(gap + 2);
    const right = tail === '' ? [] : tail.split(':');
    const last = right[right.length - 1];
    if (last?.includes('.')) right.splice(right.length - 1, 1, ...dottedQuad(last));
    for (let zeros = 8 - left.length - right.length; zeros > 0; zeros--) groups.push('0');
    groups.push(...right);
  }
  return groups
    .slice(0, 4)
    .map((group) => Number.parseInt(group, 16).toString(16))
    .join(':');
}

/** An IPv4 address written as two IPv6 groups (`::ffff:c000:201`), dotted. */
function quadOf(high: string, low: string): string {
  const [a, b] = [Number.parseInt(high, 16), Number.parseInt(low, 16)];
  return `${a >> 8}.${a & 255}.${b >> 8}.${b & 255}`;
}

/** An embedded IPv4 tail (`::1.2.3.4`) as its two groups. */
function dottedQuad(text: string): string[] {
  const [a, b, c, d] = text.split('.').map(Number) as [number, number, number, number];
  return [((a << 8) | b).toString(16), ((c << 8) | d).toString(16)];
}
