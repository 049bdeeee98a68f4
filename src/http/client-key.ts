import { isIPv4, isIPv6 } from 'node:net';

/**
 * Who a client is, by its address: its rate-limit bucket and its line in the throttled log. An IPv6
 * client is keyed by its /64: one subscriber gets a whole /64 (often more), so keying by full address
 * would let it rotate through 2^64 fresh buckets (or log lines).
 * IPv4-mapped IPv6 (`::ffff:192.0.2.1`) is the IPv4 address it carries.
 */
export function addressKey(ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped && isIPv4(mapped[1]!)) return `ip:${mapped[1]}`;
  if (!isIPv6(ip)) return `ip:${ip}`;
  return `ip6:${ipv6Groups(ip.split('%')[0]!).slice(0, 4).join(':')}::/64`;
}

/** The eight 16-bit groups of an IPv6 address, `::` expanded, in lowercase without leading zeros. */
function ipv6Groups(address: string): string[] {
  const [head, tail] = address.includes('::') ? address.split('::') : [address, null];
  const parts = (text: string | undefined) => (text ? text.split(':') : []);
  const expand = (groups: string[]) => groups.flatMap((group) => (group.includes('.') ? dottedQuad(group) : [group]));
  const left = expand(parts(head));
  const right = expand(parts(tail ?? undefined));
  const zeros = tail === null ? [] : Array<string>(8 - left.length - right.length).fill('0');
  return [...left, ...zeros, ...right].map((group) => Number.parseInt(group, 16).toString(16));
}

/** An embedded IPv4 tail (`::1.2.3.4`) as its two groups. */
function dottedQuad(text: string): string[] {
  const [a, b, c, d] = text.split('.').map(Number) as [number, number, number, number];
  return [((a << 8) | b).toString(16), ((c << 8) | d).toString(16)];
}
