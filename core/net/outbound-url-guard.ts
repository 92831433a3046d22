import dns from 'node:dns';
import net, { type LookupFunction } from 'node:net';

/**
 * SSRF guard for URLs the gateway calls on someone else's say-so (webhook targets, customers' MCP
 * servers, provider base URLs). Three layers, because each alone has a hole:
 * - `assertPublicUrlSync`: scheme and literal-IP hosts, no I/O (what ProviderContext exposes);
 * - `assertPublicUrl`: also resolves the hostname and refuses private answers;
 * - `guardedLookup` / `guardedConnectOptions`: re-checks the address actually dialled, so a DNS
 *   answer that changes between the check and the connect (rebinding) is still refused.
 */

export type OutboundRefusalReason = 'invalid_url' | 'scheme' | 'private_address';

export class OutboundUrlRefusedError extends Error {
  readonly code = 'ERR_OUTBOUND_URL_REFUSED';
  readonly reason: OutboundRefusalReason;

  constructor(reason: OutboundRefusalReason, message: string) {
    super(message);
    this.name = 'OutboundUrlRefusedError';
    this.reason = reason;
  }
}

export interface OutboundUrlPolicy {
  /** Operators set it for upstreams on their own network (vLLM, Ollama) and tests for loopback fakes. */
  allowPrivate?: boolean;
}

// ---- address classification -------------------------------------------------------------

function ipv4ToInt(address: string): number | null {
  const parts = address.split('.');
  if (parts.length !== 4) return null;
  let value = 0;
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part)) return null;
    const octet = Number(part);
    if (octet > 255) return null;
    value = value * 256 + octet;
  }
  return value;
}

/** [network, prefix length] of IPv4 ranges that are not the public internet. */
const blockedIpv4Ranges: ReadonlyArray<readonly [string, number]> = [
  ['0.0.0.0', 8], // "this network"; 0.0.0.0 reaches the local host on Linux
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata (169.254.169.254)
  ['172.16.0.0', 12],
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16],
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, includes broadcast
];

const blockedIpv4Masks = blockedIpv4Ranges.map(([network, bits]) => {
  const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  return { base: (ipv4ToInt(network)! & mask) >>> 0, mask };
});

function isBlockedIpv4Int(value: number): boolean {
  for (const { base, mask } of blockedIpv4Masks) {
    if ((value & mask) >>> 0 === base) return true;
  }
  return false;
}

/** Eight 16-bit groups, or null when the text is not an IPv6 address. */
function ipv6ToGroups(address: string): number[] | null {
  let text = address;
  const zone = text.indexOf('%');
  if (zone !== -1) text = text.slice(0, zone);
  if (!net.isIPv6(text)) return null;

  const lastColon = text.lastIndexOf(':');
  const last = text.slice(lastColon + 1);
  if (last.includes('.')) {
    // a trailing dotted quad is two groups written differently
    const v4 = ipv4ToInt(last);
    if (v4 === null) return null;
    text = `${text.slice(0, lastColon + 1)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }

  const parseGroups = (part: string) => (part === '' ? [] : part.split(':').map((g) => Number.parseInt(g, 16)));
  const doubleColon = text.indexOf('::');
  let groups: number[];
  if (doubleColon === -1) {
    groups = parseGroups(text);
  } else {
    const head = parseGroups(text.slice(0, doubleColon));
    const tail = parseGroups(text.slice(doubleColon + 2));
    const missing = 8 - head.length - tail.length;
    if (missing < 0) return null;
    groups = [...head, ...new Array<number>(missing).fill(0), ...tail];
  }
  if (groups.length !== 8 || groups.some((g) => !Number.isInteger(g) || g < 0 || g > 0xffff)) return null;
  return groups;
}

function embeddedIpv4(high: number, low: number): number {
  return ((high << 16) >>> 0) + low;
}

function isBlockedIpv6Groups(g: number[]): boolean {
  const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = g;
  const firstFiveZero = g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0;
  // ::/96 covers ::, ::1 and the deprecated IPv4-compatible form; nothing public lives there
  if (firstFiveZero && g5 === 0) return true;
  // IPv4-mapped ::ffff:a.b.c.d is how a dual-stack socket dials an IPv4 address
  if (firstFiveZero && g5 === 0xffff) return isBlockedIpv4Int(embeddedIpv4(g6, g7));
  // IPv4-translated ::ffff:0:a.b.c.d
  if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0xffff && g5 === 0) return isBlockedIpv4Int(embeddedIpv4(g6, g7));
  // NAT64 64:ff9b::a.b.c.d reaches the embedded IPv4 address through a translator
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) return isBlockedIpv4Int(embeddedIpv4(g6, g7));
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 1) return true; // local-use NAT64
  // 6to4 2002:a.b.c.d::/48 embeds an IPv4 address too
  if (g0 === 0x2002) return isBlockedIpv4Int(embeddedIpv4(g1, g2));
  if (g0 === 0x2001 && g1 === 0) return true; // Teredo: the embedded address is obfuscated, refuse the range
  if (g0 === 0x2001 && g1 === 0x0db8) return true; // documentation
  if (g0 === 0x0100 && g1 === 0 && g2 === 0 && g3 === 0) return true; // discard-only
  if ((g0 & 0xfe00) === 0xfc00) return true; // unique local fc00::/7
  if ((g0 & 0xffc0) === 0xfe80) return true; // link-local fe80::/10
  if ((g0 & 0xffc0) === 0xfec0) return true; // deprecated site-local fec0::/10
  if ((g0 & 0xff00) === 0xff00) return true; // multicast
  return false;
}

/** Whether an IP address (v4 or v6 text, brackets allowed) is outside the public internet. Non-IPs → false. */
export function isPrivateAddress(address: string): boolean {
  const bare = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  const v4 = net.isIPv4(bare) ? ipv4ToInt(bare) : null;
  if (v4 !== null) return isBlockedIpv4Int(v4);
  const groups = ipv6ToGroups(bare);
  return groups !== null && isBlockedIpv6Groups(groups);
}

// ---- URL checks ---------------------------------------------------------------------------

function parseOutboundUrl(url: string | URL): URL {
  let parsed: URL;
  try {
    parsed = typeof url === 'string' ? new URL(url) : url;
  } catch {
    throw new OutboundUrlRefusedError('invalid_url', 'The URL is not valid');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new OutboundUrlRefusedError('scheme', `Only http and https URLs are allowed, not ${parsed.protocol.replace(/:$/, '')}`);
  }
  return parsed;
}

/** The host as the URL parser normalised it: dotted IPv4, bare IPv6 or a lower-case name. */
function hostOf(url: URL): string {
  const host = url.hostname;
  return host.startsWith('[') ? host.slice(1, -1) : host;
}

function isLocalhostName(host: string): boolean {
  const name = host.endsWith('.') ? host.slice(0, -1) : host;
  return name === 'localhost' || name.endsWith('.localhost');
}

/**
 * No I/O: refuses non-http(s) schemes, literal private IPs (the WHATWG parser has already turned
 * `0x7f.1`, `2130706433`, `[::ffff:127.0.0.1]` and friends into canonical form) and localhost names.
 * A hostname that only resolves privately passes here; `assertPublicUrl` or the guarded lookup catch it.
 */
export function assertPublicUrlSync(url: string | URL, policy: OutboundUrlPolicy = {}): URL {
  const parsed = parseOutboundUrl(url);
  if (policy.allowPrivate) return parsed;
  const host = hostOf(parsed);
  if (net.isIP(host) !== 0) {
    if (isPrivateAddress(host)) {
      throw new OutboundUrlRefusedError('private_address', `Refusing ${host}: it is not a public internet address`);
    }
  } else if (isLocalhostName(host)) {
    throw new OutboundUrlRefusedError('private_address', `Refusing ${host}: it names the local host`);
  }
  return parsed;
}

type LookupAll = (hostname: string) => Promise<Array<{ address: string; family: number }>>;

const systemLookupAll: LookupAll = (hostname) => dns.promises.lookup(hostname, { all: true, verbatim: true });

/** Resolves the hostname and refuses the URL if any address it resolves to is private. */
export async function assertPublicUrl(url: string | URL, policy: OutboundUrlPolicy & { lookupAll?: LookupAll } = {}): Promise<URL> {
  const parsed = assertPublicUrlSync(url, policy);
  if (policy.allowPrivate) return parsed;
  const host = hostOf(parsed);
  if (net.isIP(host) !== 0) return parsed;
  const addresses = await (policy.lookupAll ?? systemLookupAll)(host);
  const blocked = addresses.find((entry) => isPrivateAddress(entry.address));
  if (blocked) {
    throw new OutboundUrlRefusedError('private_address', `Refusing ${host}: it resolves to ${blocked.address}, which is not a public internet address`);
  }
  return parsed;
}

/** A ProviderContext.checkOutboundUrl (or any sync checker) bound to one policy. */
export function createOutboundUrlChecker(policy: OutboundUrlPolicy = {}): (url: string) => void {
  return (url) => {
    assertPublicUrlSync(url, policy);
  };
}

type LookupCallback = Parameters<LookupFunction>[2];

/**
 * A `lookup` for net/tls.connect (and so for undici's `connect` option) that refuses private
 * answers at the moment of dialling. Literal-IP hosts never reach a lookup function, so pair it
 * with `assertPublicUrlSync` on the URL.
 */
export function guardedLookup(base: LookupFunction = dns.lookup as unknown as LookupFunction): LookupFunction {
  return (hostname, options, callback: LookupCallback) => {
    base(hostname, options, (error, address, family) => {
      if (error) {
        callback(error, address, family);
        return;
      }
      const list = Array.isArray(address) ? address.map((entry) => entry.address) : [address];
      const blocked = list.find((candidate) => isPrivateAddress(candidate));
      if (blocked !== undefined) {
        callback(
          new OutboundUrlRefusedError(
            'private_address',
            `Refusing to connect to ${hostname}: it resolved to ${blocked}, which is not a public internet address`,
          ) as unknown as NodeJS.ErrnoException,
          address,
          family,
        );
        return;
      }
      callback(null, address, family);
    });
  };
}

/** Spread into undici's `connect` options: `new Pool(origin, { connect: { ...guardedConnectOptions() } })`. */
export function guardedConnectOptions(base?: LookupFunction): { lookup: LookupFunction } {
  return { lookup: guardedLookup(base) };
}
