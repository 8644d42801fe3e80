import { lookup } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { LeaseholdError } from '../../contracts/index.js';

/**
 * Webhooks are POSTed by the fleet, from inside its network: a tenant who could aim them at
 * loopback, a private range or the cloud's metadata address would reach what only the fleet
 * should. Such addresses are refused when a webhook is registered (its literal address, and
 * what its name resolves to then) and again at every delivery, on the address the connection is
 * actually made to (after DNS, so a name re-pointed since is caught, and the checked address is
 * the one used). `LEASEHOLD_WEBHOOKS_ALLOW_PRIVATE=true` lifts it for a local receiver.
 */
const REFUSED = new BlockList();
for (const [network, bits] of [
  ['0.0.0.0', 8], // "this" network
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, the metadata address 169.254.169.254 among them
  ['172.16.0.0', 12],
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.168.0.0', 16],
  ['198.18.0.0', 15], // benchmarking
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const)
  REFUSED.addSubnet(network, bits, 'ipv4');
for (const [network, bits] of [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['64:ff9b::', 96], // NAT64: an IPv4 address inside
  ['fc00::', 7], // unique local (AWS's metadata fd00:ec2::254 among them)
  ['fe80::', 10], // link-local
  ['ff00::', 8], // multicast
] as const)
  REFUSED.addSubnet(network, bits, 'ipv6');

export class WebhookAddressRefused extends LeaseholdError<'webhook_address_refused'> {
  override readonly name = 'WebhookAddressRefused';
  constructor(message: string) {
    super('webhook_address_refused', message, false);
  }
}

/** Whether an IP address is loopback, private, link-local, metadata or otherwise not the internet's. */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return REFUSED.check(address, 'ipv4');
  // BlockList checks an IPv4-mapped IPv6 address (::ffff:127.0.0.1) against the IPv4 rules too.
  if (family === 6) return REFUSED.check(address, 'ipv6');
  return true;
}

/**
 * A webhook URL as registered: http or https, no credentials, and — unless private addresses are
 * allowed — a host that is no private literal, no `localhost`, and whose name resolves to no
 * private address. Answers the URL normalised; throws {@link WebhookAddressRefused} otherwise.
 */
export async function checkWebhookUrl(raw: string, allowPrivate: boolean): Promise<string> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new WebhookAddressRefused('expected an absolute http or https URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new WebhookAddressRefused(`expected an http or https URL, found ${url.protocol}`);
  if (url.username || url.password) throw new WebhookAddressRefused('a webhook URL carries no credentials');
  if (allowPrivate) return url.href;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host)) {
    if (isPrivateAddress(host)) throw refusedHost(url.hostname);
    return url.href;
  }
  if (host === 'localhost' || host.endsWith('.localhost')) throw refusedHost(url.hostname);
  for (const address of await resolveAll(host))
    if (isPrivateAddress(address)) throw refusedHost(url.hostname);
  return url.href;
}

function refusedHost(host: string): WebhookAddressRefused {
  return new WebhookAddressRefused(
    `${host} is a loopback, private, link-local or metadata address (LEASEHOLD_WEBHOOKS_ALLOW_PRIVATE is off)`,
  );
}

/** Every address a name resolves to; none when it does not resolve (the delivery will say so). */
function resolveAll(host: string): Promise<string[]> {
  return new Promise((resolve) => {
    lookup(host, { all: true }, (error, addresses) => {
      resolve(error ? [] : addresses.map((entry) => entry.address));
    });
  });
}

/**
 * The `lookup` a delivery's connection uses: the system resolver, then every address it answers
 * refused if one is private, so the connection goes to a checked address and nowhere else.
 */
export const guardedLookup: LookupFunction = (hostname, options, callback) => {
  lookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, '', 4);
    const refused = addresses.find((entry) => isPrivateAddress(entry.address));
    if (refused) return callback(refusedHost(hostname), '', 4);
    if (options.all) return (callback as (e: null, a: typeof addresses) => void)(null, addresses);
    const first = addresses[0];
    if (!first) return callback(new Error(`${hostname} resolved to no address`), '', 4);
    return callback(null, first.address, first.family);
  });
};
