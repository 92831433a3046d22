import { isIPv6 } from 'node:net';

/**
 * The part of a client address that per-address limits count by. An IPv4 address is one client;
 * an IPv6 client is usually given a whole /64 (and picks new addresses in it at will), so its
 * addresses count together under their /64. An IPv4 address written as IPv6 (`::ffff:a.b.c.d`,
 * as a dual-stack socket reports it) counts as the IPv4 address.
 */
export function addressBucket(ip: string): string {
  if (!isIPv6(ip)) return ip;
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip);
  if (mapped) return mapped[1]!;
  return `${ipv6Groups(ip.split('%')[0]!).slice(0, 4).join(':')}::/64`;
}

/** The eight groups of a valid IPv6 address, in lower-case hex without leading zeros. */
function ipv6Groups(ip: string): string[] {
  let text = ip;
  // A dotted IPv4 tail is the last two groups.
  const tail = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (tail) {
    const [a, b, c, d] = tail.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, tail.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', rest] = text.split('::');
  const before = head === '' ? [] : head.split(':');
  const after = rest === undefined || rest === '' ? [] : rest.split(':');
  const groups = rest === undefined ? before : [...before, ...Array<string>(8 - before.length - after.length).fill('0'), ...after];
  return groups.map((group) => Number.parseInt(group, 16).toString(16));
}
