import { lookup } from 'node:dns/promises';
import { hostname as osHostname } from 'node:os';

/** Addresses that bind every interface: no other process can reach a worker at them. */
const EVERY_INTERFACE: ReadonlySet<string> = new Set(['0.0.0.0', '::', '[::]']);

/** What the advertised URL is chosen from. */
export interface AdvertiseInput {
  /** `HOST`, the address the data plane listens on. */
  host: string;
  /** The port it listens on (the bound one, when `BROWSER_WORKER_PORT` is 0). */
  port: number;
  /** This machine's name (`os.hostname()`: a StatefulSet pod's name in Kubernetes). */
  hostname: string;
  /** Whether `hostname` resolves here (`dns.lookup`); unused unless the hostname is advertised. */
  hostnameResolves: boolean;
  /** `BROWSER_WORKER_URL`, when set. */
  configuredUrl: string | undefined;
}

/** The URL run workers are told to reach this worker at, and what it was taken from. */
export type Advertised =
  | { ok: true; url: string; source: 'BROWSER_WORKER_URL' | 'hostname' | 'HOST' }
  | { ok: false; message: string };

/**
 * The URL a browser worker advertises in the registry:
 * - `BROWSER_WORKER_URL` when set (the Kubernetes manifests set it from the pod and its headless Service);
 * - bound to every interface (`HOST` 0.0.0.0 or ::), `http://<hostname>:<port>` — a container's or
 *   pod's name, which its neighbours resolve — or, when the name does not resolve, a refusal that
 *   names `BROWSER_WORKER_URL`: advertising a name no one resolves strands every run on its profiles;
 * - otherwise `http://<HOST>:<port>`, the one address it listens on.
 */
export function advertisedUrl(input: AdvertiseInput): Advertised {
  if (input.configuredUrl) return { ok: true, url: input.configuredUrl, source: 'BROWSER_WORKER_URL' };
  if (EVERY_INTERFACE.has(input.host)) {
    if (!input.hostname || !input.hostnameResolves)
      return {
        ok: false,
        message:
          `HOST=${input.host} listens on every interface, and this machine's name ` +
          `${JSON.stringify(input.hostname)} does not resolve, so run workers could not reach ` +
          `http://${input.hostname}:${input.port}; set BROWSER_WORKER_URL to the URL they reach this browser worker at`,
      };
    return { ok: true, url: `http://${urlHost(input.hostname)}:${input.port}`, source: 'hostname' };
  }
  return { ok: true, url: `http://${urlHost(input.host)}:${input.port}`, source: 'HOST' };
}

/** An IPv6 literal goes in brackets in a URL. */
function urlHost(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

/** Whether `HOST` binds every interface, so the machine's name must resolve for the URL to be advertised. */
export function needsHostname(host: string, configuredUrl: string | undefined): boolean {
  return !configuredUrl && EVERY_INTERFACE.has(host);
}

/** This machine's name and whether it resolves (looked up only when it would be advertised). */
export async function localHostname(
  host: string,
  configuredUrl: string | undefined,
): Promise<{ hostname: string; hostnameResolves: boolean }> {
  const hostname = osHostname();
  if (!needsHostname(host, configuredUrl)) return { hostname, hostnameResolves: false };
  const hostnameResolves = await lookup(hostname).then(
    () => true,
    () => false,
  );
  return { hostname, hostnameResolves };
}
