import { isIPv4, isIPv6 } from 'node:net';
import type { FastifyRequest } from 'fastify';
import ipaddr from 'ipaddr.js';

/** Whom a request counts against (its streams, its share of the storage budget): its bearer token (`token:<id>`), else its address. */
export function requestClient(request: FastifyRequest): string {
  return request.tokenClient ?? addressKey(request.ip);
}

/**
 * Who a client is, by its address: its rate-limit bucket and its line in the throttled log. An IPv6
 * client is keyed by its /64: one subscriber gets a whole /64 (often more), so keying by full address
 * would let it rotate through 2^64 fresh buckets (or log lines).
 * IPv4-mapped IPv6 (`::ffff:192.0.2.1`, `::ffff:c000:201`, written out in full or not) is the IPv4
 * address it carries.
 */
export function addressKey(ip: string): string {
  // Most clients: isIPv6's pattern is far costlier than isIPv4's, and this runs on every request.
  if (isIPv4(ip)) return `ip:${ip}`;
  if (isIPv6(ip)) {
    const bare = ip.split('%', 1)[0]!;
    const address = ipaddr.IPv6.parse(bare);
    // ipaddr.js reads the deprecated IPv4-compatible `::a.b.c.d` as mapped: it is not an IPv4 client.
    if (address.isIPv4MappedAddress() && !/^::[\d.]+$/.test(bare)) return `ip:${address.toIPv4Address().toString()}`;
    return `ip6:${address.parts
      .slice(0, 4)
      .map((part) => part.toString(16))
      .join(':')}::/64`;
  }
  // What a proxy in TRUST_PROXY wrote, if not a bare address: with a port (`192.0.2.1:40001`,
  // `[2001:db8::1]:443`, which some proxies write) it is the address; anything else is one client,
  // never a fresh bucket per spelling.
  const withPort = /^(?:(\d+\.\d+\.\d+\.\d+)(?::\d+)?|\[([^\]]+)\](?::\d+)?)$/.exec(ip);
  const address = withPort?.[1] ?? withPort?.[2];
  if (address !== undefined && (isIPv4(address) || isIPv6(address))) return addressKey(address);
  return 'ip:unparsed';
}
