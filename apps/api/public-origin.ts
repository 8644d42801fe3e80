import type { IncomingHttpHeaders } from 'node:http';
import type { Config } from '../../libs/config/index.js';

/** Hosts whose listener only this machine reaches, or that listen on every address. */
const LOOPBACK_OR_ANY = /^(?:127(?:\.\d{1,3}){3}|::1|localhost|0\.0\.0\.0|::)$/;

/**
 * The origins a browser shows the API under: API_PUBLIC_URL when set; else http://HOST:PORT as it
 * listens — with HOST a loopback or any-address, also its loopback spellings (localhost, 127.0.0.1,
 * [::1]) on that port, which no other site can be. Never the request's own `Host`, which whoever
 * sends the request writes. One place for every same-origin check of the API (the sign-in form
 * now; a WebSocket's `Origin` later).
 */
export class ApiOrigins {
  #origins: ReadonlySet<string>;

  constructor(private readonly config: Config) {
    this.#origins = new Set(config.api.publicUrl ? [config.api.publicUrl] : []);
  }

  /** Sets the default origins from the port the API listens on (given or chosen, as PORT=0 does). */
  listening(port: number): void {
    if (this.config.api.publicUrl) return;
    const host = this.config.http.host;
    const spelled = host.includes(':') ? `[${host}]` : host;
    const origins = [`http://${spelled}:${port}`];
    if (LOOPBACK_OR_ANY.test(host))
      for (const loopback of ['localhost', '127.0.0.1', '[::1]']) origins.push(`http://${loopback}:${port}`);
    this.#origins = new Set(origins.map((origin) => new URL(origin).origin));
  }

  /** True when `origin` (an `Origin` header) is one of the API's own. */
  allows(origin: string): boolean {
    return this.#origins.has(origin);
  }
}

/**
 * Whether a browser sent this request from one of the API's own pages: its `Origin` is one of
 * ours, or — a browser that sends no `Origin` — `Sec-Fetch-Site: same-origin`. Anything else is
 * refused, a request with neither header included: no browser form sends neither, and another
 * site's form sends its own origin (a login CSRF would sign the victim into the attacker's tenant).
 */
export function sentFromOwnPage(headers: IncomingHttpHeaders, origins: ApiOrigins): boolean {
  const site = headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin') return false;
  const origin = headers.origin;
  if (origin !== undefined) return origins.allows(origin);
  return site === 'same-origin';
}
