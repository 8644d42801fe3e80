import { lookup } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { canonicalHost, isLocalhostName } from './address-ranges.js';
import type { EgressGuard, RefusalReason } from './egress-guard.js';

export interface CheckedAddress {
  address: string;
  family: 4 | 6;
}

/**
 * Where a connection to `host:port` may go: every address the name resolves to, each judged by the
 * guard. One refused address refuses the name (a name that points anywhere refused is not trusted
 * with the rest), so the connection is made to a judged address and nowhere else — DNS asked again
 * later cannot slip another in (rebinding).
 */
export type Resolution =
  | { ok: true; host: string; addresses: CheckedAddress[] }
  | { ok: false; host: string; why: RefusalReason }
  | { ok: false; host: string; why: 'unresolved' | 'malformed' };

const LOCALHOST: CheckedAddress[] = [
  { address: '127.0.0.1', family: 4 },
  { address: '::1', family: 6 },
];

/** Resolves and judges `rawHost` (any spelling: a name, a literal address, bracketed IPv6). */
export async function resolveChecked(rawHost: string, port: number, guard: EgressGuard): Promise<Resolution> {
  const host = canonicalHost(rawHost);
  if (host === undefined) return { ok: false, host: rawHost, why: 'malformed' };
  const family = isIP(host);
  const addresses: CheckedAddress[] =
    family === 4 || family === 6
      ? [{ address: host, family }]
      : isLocalhostName(host)
        ? LOCALHOST
        : await lookupAll(host);
  if (addresses.length === 0) return { ok: false, host, why: 'unresolved' };
  for (const { address } of addresses) {
    const verdict = guard.judge(address, port);
    if (!verdict.allowed) return { ok: false, host, why: verdict.reason };
  }
  return { ok: true, host, addresses };
}

function lookupAll(host: string): Promise<CheckedAddress[]> {
  return new Promise((resolve) => {
    lookup(host, { all: true }, (error, entries) => {
      resolve(
        error ? [] : entries.map((entry) => ({ address: entry.address, family: entry.family === 6 ? 6 : 4 })),
      );
    });
  });
}

/** Thrown (through a lookup) when a connection's name resolves to a refused address. */
export class AddressRefused extends Error {
  override readonly name = 'AddressRefused';
  constructor(
    readonly host: string,
    readonly reason: RefusalReason,
  ) {
    super(`${host}: the egress guard refused its address (${reason})`);
  }
}

/**
 * A `lookup` for `http.request` that resolves with {@link resolveChecked} and answers only judged
 * addresses: the socket connects to what was checked. Made per connection, for its port.
 */
export function checkedLookup(guard: EgressGuard, port: number): LookupFunction {
  return (hostname, options, callback) => {
    resolveChecked(hostname, port, guard).then(
      (resolution): void => {
        if (!resolution.ok) {
          const error =
            resolution.why === 'private_address' || resolution.why === 'own_port'
              ? new AddressRefused(hostname, resolution.why)
              : Object.assign(new Error(`${hostname} did not resolve`), { code: 'ENOTFOUND' });
          callback(error, '', 4);
          return;
        }
        if (options.all) {
          (callback as unknown as (error: null, addresses: CheckedAddress[]) => void)(
            null,
            resolution.addresses,
          );
          return;
        }
        const first = resolution.addresses[0] as CheckedAddress;
        callback(null, first.address, first.family);
      },
      (error: Error) => callback(error, '', 4),
    );
  };
}
