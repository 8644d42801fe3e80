import { BlockList, isIP } from 'node:net';
import { canonicalHost, effectiveAddress, isLocalhostName, isNotPublic } from './address-ranges.js';

/** Why an address is refused: a range that is not the internet's, or one of the fleet's own ports on an allowed one. */
export type RefusalReason = 'private_address' | 'own_port';
export type Verdict = { allowed: true } | { allowed: false; reason: RefusalReason };

export interface EgressPolicy {
  /**
   * CIDRs of loopback or private ranges the fleet's operator lets traffic reach
   * (LEASEHOLD_EGRESS_ALLOW_CIDRS, checked at start-up). Public addresses need none.
   */
  readonly allowCidrs: readonly string[];
  /**
   * Ports refused on every address the allowance admits: the API's, the data plane's, the
   * metrics ports, Redis's, the egress proxy's. More are added with {@link EgressGuard.refusePort}
   * once a server listens on a port chosen at start (port 0).
   */
  readonly ownPorts: readonly number[];
}

/**
 * The one address guard (DESIGN §12) the webhook sender and the browser's egress proxy share: a
 * connection may go to a public address, or to one the operator's allowance names — never to the
 * fleet's own ports there. It judges addresses, after DNS: a name is judged by what it resolves
 * to at the moment of connecting (`resolveChecked`), and the connection goes to the address
 * judged.
 */
export class EgressGuard {
  readonly #allowed = new BlockList();
  readonly #ownPorts: Set<number>;
  readonly allowCidrs: readonly string[];

  constructor(policy: EgressPolicy) {
    this.allowCidrs = [...policy.allowCidrs];
    for (const cidr of policy.allowCidrs) {
      const [network = '', bits = ''] = cidr.split('/');
      const family = isIP(network);
      if (family === 0) throw new RangeError(`expected a CIDR such as 10.0.0.0/8, got "${cidr}"`);
      this.#allowed.addSubnet(network, Number(bits), family === 4 ? 'ipv4' : 'ipv6');
    }
    this.#ownPorts = new Set(policy.ownPorts.filter((port) => port > 0));
  }

  /** Refuses `port` from now on, on every allowed address (a server of this process listens there). */
  refusePort(port: number): void {
    if (port > 0) this.#ownPorts.add(port);
  }

  /** Stops refusing `port`, which a server of this process no longer listens on (an egress door that closed). */
  releasePort(port: number): void {
    this.#ownPorts.delete(port);
  }

  get ownPorts(): readonly number[] {
    return [...this.#ownPorts].sort((a, b) => a - b);
  }

  /** Whether a connection to `address` (an IP address, any spelling Node prints) on `port` may be made. */
  judge(address: string, port: number): Verdict {
    const effective = effectiveAddress(address);
    if (!effective) return { allowed: false, reason: 'private_address' };
    if (!isNotPublic(effective)) return { allowed: true };
    const family = effective.kind === 'ipv4' ? 'ipv4' : 'ipv6';
    if (!this.#allowed.check(effective.address, family)) return { allowed: false, reason: 'private_address' };
    if (this.#ownPorts.has(port)) return { allowed: false, reason: 'own_port' };
    return { allowed: true };
  }
}

/** The port a URL connects to: its own, else its scheme's. */
export function portOf(url: URL): number {
  if (url.port) return Number(url.port);
  return url.protocol === 'https:' || url.protocol === 'wss:' ? 443 : 80;
}

/**
 * An origin judged where no connection is made yet (a profile's creation): a literal address in
 * any spelling, and `localhost` / `*.localhost` (loopback without DNS, as Chromium reads them),
 * are judged now; any other name is judged at connection, so one that does not resolve here is
 * accepted. Anything that is no http(s) URL is left to the origin schema.
 */
export function judgeOriginAtCreation(origin: string, guard: EgressGuard): Verdict {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return { allowed: true };
  }
  const host = canonicalHost(url.hostname);
  if (host === undefined) return { allowed: true };
  const port = portOf(url);
  if (isLocalhostName(host)) return guard.judge('127.0.0.1', port);
  if (isIP(host)) return guard.judge(host, port);
  return { allowed: true };
}

/** The sentence a refusal is told in: what was refused and the setting that widens the guard. */
export function describeRefusal(
  what: string,
  verdict: Verdict,
  widenedBy = 'LEASEHOLD_EGRESS_ALLOW_CIDRS names the ranges an operator allows',
): string {
  if (verdict.allowed) return `${what} is allowed`;
  return verdict.reason === 'own_port'
    ? `${what} is one of the fleet's own ports, which nothing the fleet sends out may reach`
    : `${what} is a loopback, private, link-local or metadata address (${widenedBy})`;
}

/**
 * The first origin of a profile's lists the guard refuses at creation, named by its field
 * (`allowed_origins[2]`) with the sentence to answer it with; undefined when none is.
 */
export function refusedProfileOrigin(
  lists: Readonly<Record<string, readonly string[]>>,
  guard: EgressGuard,
): { field: string; message: string } | undefined {
  for (const [name, origins] of Object.entries(lists))
    for (const [index, origin] of origins.entries()) {
      const verdict = judgeOriginAtCreation(origin, guard);
      if (!verdict.allowed) {
        const field = `${name}[${index}]`;
        return { field, message: `${field}: ${describeRefusal(origin, verdict)}` };
      }
    }
  return undefined;
}
