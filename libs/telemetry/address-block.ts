import { isIPv4, isIPv6 } from 'node:net';

/**
 * The network a client address belongs to, for budgets a host must not multiply by changing its
 * address: an IPv4 /24 (`203.0.113.0/24`) or an IPv6 /64 (`2001:db8:1:2::/64`), as one host
 * commonly holds every address of its /64 and a whole 127/8 answers on loopback. An IPv4-mapped
 * IPv6 address counts as its IPv4 one; anything unparsable as itself.
 */
export function addressBlock(address: string): string {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address)?.[1];
  const ipv4 = mapped ?? address;
  if (isIPv4(ipv4)) return `${ipv4.split('.').slice(0, 3).join('.')}.0/24`;
  const groups = isIPv6(address) ? ipv6Groups(address) : undefined;
  if (!groups) return address;
  return `${groups
    .slice(0, 4)
    .map((group) => group.toString(16))
    .join(':')}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 address (zone dropped, `::` and a dotted tail expanded). */
function ipv6Groups(address: string): number[] | undefined {
  let text = address.split('%')[0] ?? '';
  const dotted = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const split = (part: string) => (part === '' ? [] : part.split(':'));
  const before = split(head);
  const after = tail === undefined ? [] : split(tail);
  const zeros = tail === undefined ? [] : Array.from({ length: 8 - before.length - after.length }, () => '0');
  const groups = [...before, ...zeros, ...after];
  return groups.length === 8 ? groups.map((group) => Number.parseInt(group, 16)) : undefined;
}
