import { LeaseholdError } from '../contracts/index.js';
import { canonicalHost, describeRefusal, EgressGuard, portOf, resolveChecked } from '../egress/index.js';

/**
 * Webhooks are POSTed by the fleet, from inside its network: a tenant who could aim them at
 * loopback, a private range or the cloud's metadata address would reach what only the fleet
 * should. They pass the one address guard of libs/egress (DESIGN §12) when a webhook is registered
 * (its literal address in every spelling, and what its name resolves to then) and again at every
 * delivery, on the address the connection is actually made to (after DNS, so a name re-pointed
 * since is caught, and the checked address is the one used). `LEASEHOLD_WEBHOOKS_ALLOW_PRIVATE=true`
 * allows every range for a local receiver; the fleet's own ports stay refused even then.
 */
export function webhookGuard(allowPrivate: boolean, ownPorts: readonly number[] = []): EgressGuard {
  return new EgressGuard({ allowCidrs: allowPrivate ? ['0.0.0.0/0', '::/0'] : [], ownPorts });
}

export class WebhookAddressRefused extends LeaseholdError<'webhook_address_refused'> {
  override readonly name = 'WebhookAddressRefused';
  constructor(message: string) {
    super('webhook_address_refused', message, false);
  }
}

/**
 * A webhook URL as registered: http or https, no credentials, and a host the guard allows — a
 * literal in any spelling, `localhost`, and every address a name resolves to now (a name that does
 * not resolve is accepted: its deliveries will say `unreachable`). Answers the URL normalised;
 * throws {@link WebhookAddressRefused} otherwise.
 */
export async function checkWebhookUrl(raw: string, guard: EgressGuard): Promise<string> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new WebhookAddressRefused('expected an absolute http or https URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new WebhookAddressRefused(`expected an http or https URL, found ${url.protocol}`);
  if (url.username || url.password) throw new WebhookAddressRefused('a webhook URL carries no credentials');
  const host = canonicalHost(url.hostname);
  if (host === undefined) throw new WebhookAddressRefused('expected an absolute http or https URL');
  const port = portOf(url);
  const resolution = await resolveChecked(host, port, guard);
  if (!resolution.ok && (resolution.why === 'private_address' || resolution.why === 'own_port'))
    throw new WebhookAddressRefused(
      describeRefusal(
        url.host,
        { allowed: false, reason: resolution.why },
        'LEASEHOLD_WEBHOOKS_ALLOW_PRIVATE is off',
      ),
    );
  return url.href;
}
