import { BlockList, isIP } from 'node:net';

/**
 * The addresses that are not the internet's: loopback, private, link-local, unique-local,
 * multicast, metadata (169.254.169.254 and AWS's fd00:ec2::254 sit in link-local and unique-local)
 * and the reserved ranges nothing public answers on.
 */
const NOT_PUBLIC = new BlockList();
for (const [network, bits] of [
  ['0.0.0.0', 8], // "this" network
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, the metadata address among them
  ['172.16.0.0', 12],
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.168.0.0', 16],
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const)
  NOT_PUBLIC.addSubnet(network, bits, 'ipv4');
for (const [network, bits] of [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['100::', 64], // discard
  ['2001:db8::', 32], // documentation
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated, still routed by some)
  ['ff00::', 8], // multicast
] as const)
  NOT_PUBLIC.addSubnet(network, bits, 'ipv6');

/**
 * What an address means for the guard:
 * - `ipv4` / `ipv6`: judge this address (for an IPv6 form that carries an IPv4 address a router
 *   would reach — mapped, NAT64, 6to4 — the IPv4 address inside);
 * - `never`: an IPv6 form that embeds an IPv4 address in a way no public route serves
 *   (IPv4-compatible `::a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d`, local-use NAT64, Teredo):
 *   refused whole, since judging the embedded address right is harder than it is worth.
 */
export type Effective =
  | { kind: 'ipv4'; address: string }
  | { kind: 'ipv6'; address: string }
  | { kind: 'never'; address: string };

export function effectiveAddress(raw: string): Effective | undefined {
  const family = isIP(raw);
  if (family === 4) return { kind: 'ipv4', address: raw };
  if (family !== 6 || raw.includes('%')) return undefined;
  const groups = ipv6Groups(raw);
  if (!groups) return undefined;
  const [g0, g1, g2, g3, g4, g5, g6, g7] = groups as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const zeroTo = (end: number) => groups.slice(0, end).every((group) => group === 0);
  const lastIpv4 = ipv4Of(g6, g7);
  // ::ffff:0:0/96, IPv4-mapped: the socket reaches the IPv4 address.
  if (zeroTo(5) && g5 === 0xffff) return { kind: 'ipv4', address: lastIpv4 };
  // ::ffff:0:0:0/96, IPv4-translated (SIIT).
  if (zeroTo(4) && g4 === 0xffff && g5 === 0) return { kind: 'never', address: raw };
  // ::/96, IPv4-compatible (deprecated), other than :: and ::1 which the ranges above judge.
  if (zeroTo(6) && (g6 !== 0 || g7 > 1)) return { kind: 'never', address: raw };
  // 64:ff9b::/96, the well-known NAT64 prefix: the gateway reaches the IPv4 address.
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0)
    return { kind: 'ipv4', address: lastIpv4 };
  // 64:ff9b:1::/48, local-use NAT64: where the IPv4 address sits is the network's own choice.
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 1) return { kind: 'never', address: raw };
  // 2002::/16, 6to4: the relay reaches the IPv4 address in bits 16–47.
  if (g0 === 0x2002) return { kind: 'ipv4', address: ipv4Of(g1, g2) };
  // 2001::/32, Teredo: the client's address is obfuscated in the last bits; refused whole.
  if (g0 === 0x2001 && g1 === 0) return { kind: 'never', address: raw };
  return { kind: 'ipv6', address: raw };
}

/** Whether an effective address is one of the ranges that are not the internet's. */
export function isNotPublic(effective: Effective): boolean {
  if (effective.kind === 'never') return true;
  return NOT_PUBLIC.check(effective.address, effective.kind);
}

function ipv4Of(high: number, low: number): string {
  return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;
}

/** The eight 16-bit groups of a valid IPv6 address (`::` and a dotted IPv4 tail expanded). */
function ipv6Groups(address: string): number[] | undefined {
  let text = address;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail, extra] = text.split('::');
  if (extra !== undefined) return undefined;
  const parse = (part: string | undefined) =>
    part ? part.split(':').map((group) => Number.parseInt(group, 16)) : [];
  const front = parse(head);
  const back = parse(tail);
  const missing = 8 - front.length - back.length;
  if (tail === undefined ? missing !== 0 : missing < 0) return undefined;
  const groups = [...front, ...new Array<number>(missing).fill(0), ...back];
  return groups.every((group) => Number.isInteger(group) && group >= 0 && group <= 0xffff)
    ? groups
    : undefined;
}

/**
 * A host as Chromium and Node would read it, or undefined when it is no host: lower-cased, an IP
 * address in its canonical form whatever its spelling — decimal `2130706433`, hex `0x7f.1`, octal
 * `0177.0.0.1`, short `127.1`, bracketed or bare IPv6. The WHATWG URL parser does this for URLs;
 * a CONNECT authority or a bare host arrives unparsed, so it goes through the same parser here.
 */
export function canonicalHost(raw: string): string | undefined {
  const bare = raw.startsWith('[') && raw.endsWith(']') ? raw.slice(1, -1) : raw;
  if (bare === '' || /[\s@/\\?#%]/.test(bare)) return undefined;
  const bracketed = bare.includes(':') ? `[${bare}]` : bare;
  let hostname: string;
  try {
    hostname = new URL(`http://${bracketed}/`).hostname;
  } catch {
    return undefined;
  }
  const host = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  return host === '' ? undefined : host;
}

/** `localhost` and every `*.localhost` name: loopback, without asking DNS, as Chromium reads them. */
export function isLocalhostName(host: string): boolean {
  const name = host.endsWith('.') ? host.slice(0, -1) : host;
  return name === 'localhost' || name.endsWith('.localhost');
}
