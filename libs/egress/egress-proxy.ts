import {
  Agent,
  createServer,
  type IncomingMessage,
  request,
  type Server,
  type ServerResponse,
} from 'node:http';
import { type AddressInfo, connect, type LookupFunction, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { canonicalHost } from './address-ranges.js';
import { type EgressGuard, portOf } from './egress-guard.js';
import { AddressRefused, type CheckedAddress, type Resolution, resolveChecked } from './resolve-checked.js';

/** What the proxy logs: one debug line per refusal (host and port only: no path, no query). */
export interface EgressLog {
  debug(fields: Record<string, unknown>, message: string): void;
}

export interface EgressProxyOptions {
  guard: EgressGuard;
  log: EgressLog;
  /** How long a connection to a checked address may take before the request is answered 504 (default 15 s). */
  connectTimeoutMs?: number;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 15_000;
/** Headers that describe one hop, never forwarded (RFC 9110 §7.6.1, and the proxy's own). */
/**
 * The proxy's own headers (`leasehold-egress`, `leasehold-egress-error`): a site's answer never
 * carries them through, so a page cannot pass itself off as the proxy's refusal.
 */
const OWN_HEADER = 'leasehold-egress';

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * The browser worker's egress proxy (DESIGN §12: the fleet's network is not the browser's).
 * Chromium is launched with it as its only proxy, loopback included (Playwright adds
 * `--proxy-bypass-list=<-loopback>`), so every request of every lease — navigation, frame,
 * subresource, WebSocket, whatever the profile's `subresources` — crosses it. For each it resolves
 * the name, judges every address with the {@link EgressGuard}, and connects to an address it
 * judged: `CONNECT` (https, ws, wss), absolute-form HTTP (kept alive, forwarded with a lookup
 * pinned to the judged addresses) and absolute-form upgrades.
 *
 * Answers it makes itself carry no body and nothing of the fleet: a refused address is `403`
 * (a CONNECT's 403 makes Chromium fail the load with net::ERR_TUNNEL_CONNECTION_FAILED; a plain
 * http request gets the 403 as its response), a name that does not resolve or an address that does
 * not answer is `502`, a connection that takes too long `504`. Each carries `leasehold-egress`
 * saying which, for the fleet's own diagnostics.
 *
 * Written here rather than taken from npm: the proxies there (proxy-chain, http-proxy, proxy) take
 * a host and resolve it themselves at connect time, so the address judged and the address
 * connected to could differ; this one hands the socket the judged addresses.
 */
export class EgressProxy {
  readonly #server: Server;
  readonly #guard: EgressGuard;
  readonly #log: EgressLog;
  readonly #connectTimeoutMs: number;
  /** Keeps upstream connections of plain http alive between requests, as a browser would. */
  readonly #agent = new Agent({ keepAlive: true, maxFreeSockets: 64 });
  /** Every socket open on either side, destroyed at close so the stop is bounded. */
  readonly #sockets = new Set<Duplex>();
  /** The doors opened and not closed yet: closed with the proxy. */
  readonly #doors = new Set<Server>();
  #closing: Promise<void> | undefined;

  private constructor(options: EgressProxyOptions) {
    this.#guard = options.guard;
    this.#log = options.log;
    this.#connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    this.#server = this.#serve(null, () => undefined);
  }

  /** A server of this proxy; `origins` (null: any) are the only origins its requests may reach. */
  #serve(origins: ReadonlySet<string> | null, onRefused: () => void): Server {
    const server = createServer();
    const gate: OriginGate = { origins, onRefused };
    server.on('connection', (socket: Socket) => this.#track(socket));
    server.on('request', (incoming: IncomingMessage, answer: ServerResponse) => {
      this.#forward(incoming, answer, gate).catch(() => answer.destroy());
    });
    server.on('connect', (incoming: IncomingMessage, client: Duplex, head: Buffer) => {
      this.#tunnel(incoming, client, head, gate).catch(() => client.destroy());
    });
    server.on('upgrade', (incoming: IncomingMessage, client: Duplex, head: Buffer) => {
      this.#upgrade(incoming, client, head, gate).catch(() => client.destroy());
    });
    server.on('clientError', (_error, socket: Duplex) => socket.destroy());
    return server;
  }

  /** Listens on 127.0.0.1, an ephemeral port, which the guard refuses from then on. */
  static async start(options: EgressProxyOptions): Promise<EgressProxy> {
    const proxy = new EgressProxy(options);
    await listenOnLoopback(proxy.#server);
    options.guard.refusePort(proxy.port);
    return proxy;
  }

  /**
   * A door of the proxy for one browser context (one lease): a listener on a loopback port of its
   * own, so the proxy knows whose requests arrive there without asking the browser — credentials
   * would make Playwright pause every request to answer them. Through it a request reaches only
   * `origins` (null: any origin), besides passing the address guard; a CONNECT names no scheme, so
   * it may reach the host and port of an allowed http or https origin. Close it after its context.
   */
  async open(origins: ReadonlySet<string> | null): Promise<EgressDoor> {
    let refused = 0;
    const server = this.#serve(origins, () => {
      refused += 1;
    });
    await listenOnLoopback(server);
    const port = (server.address() as AddressInfo).port;
    this.#guard.refusePort(port);
    this.#doors.add(server);
    let closing: Promise<void> | undefined;
    return {
      url: `http://127.0.0.1:${port}`,
      refused: () => refused,
      close: () => {
        closing ??= new Promise<void>((resolve) => {
          this.#doors.delete(server);
          server.close(() => {
            // The port may be anyone's from now on.
            this.#guard.releasePort(port);
            resolve();
          });
          server.closeAllConnections();
        });
        return closing;
      },
    };
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  /** The proxy server for Chromium's launch. */
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Stops listening and destroys every open socket: bounded, idempotent. */
  close(): Promise<void> {
    this.#closing ??= new Promise<void>((resolve) => {
      this.#server.close(() => resolve());
      for (const door of this.#doors) door.close();
      for (const socket of this.#sockets) socket.destroy();
      this.#agent.destroy();
    });
    return this.#closing;
  }

  async #forward(incoming: IncomingMessage, answer: ServerResponse, gate: OriginGate): Promise<void> {
    const url = absoluteHttpUrl(incoming.url);
    if (!url) return void answer.writeHead(400, { 'content-length': 0 }).end();
    const port = portOf(url);
    if (!this.#admits(gate, [url.origin], url.hostname, port, 'http'))
      return void fault(403, 'ERR_BLOCKED_BY_CLIENT').answer(answer);
    const resolution = await resolveChecked(url.hostname, port, this.#guard);
    if (!resolution.ok) return void this.#refuse(resolution, port, 'http').answer(answer);
    const upstream = request({
      host: resolution.host,
      port,
      method: incoming.method,
      path: `${url.pathname}${url.search}`,
      headers: forwardedHeaders(incoming.rawHeaders),
      setHost: false,
      agent: this.#agent,
      lookup: pinnedLookup(resolution.addresses),
    });
    upstream.on('socket', (socket) => this.#watchConnect(socket, upstream));
    upstream.on('response', (response) => {
      answer.writeHead(
        response.statusCode ?? 502,
        response.statusMessage,
        forwardedHeaders(response.rawHeaders),
      );
      response.pipe(answer);
      response.on('error', () => answer.destroy());
    });
    upstream.on('error', (error: NodeJS.ErrnoException) => {
      const neverConnected = neverConnectedError(error);
      // A failure once the request may have gone is no proxy's word to give: the socket closes, as
      // the site's own would have (the browser then tells it as an empty answer, its outcome unknown).
      if (answer.headersSent || neverConnected === null) answer.destroy();
      else fault(error.code === 'ETIMEDOUT' ? 504 : 502, neverConnected).answer(answer);
    });
    answer.on('close', () => {
      if (!answer.writableFinished) upstream.destroy();
    });
    incoming.pipe(upstream);
  }

  async #tunnel(incoming: IncomingMessage, client: Duplex, head: Buffer, gate: OriginGate): Promise<void> {
    this.#track(client);
    // The server hands the socket over without its own error listener: a reset while the name is
    // resolved must end this socket, not the process.
    client.on('error', () => client.destroy());
    const authority = parseAuthority(incoming.url ?? '');
    if (!authority) return void client.end(rawAnswer(400));
    if (!this.#admits(gate, tunnelOrigins(authority), authority.host, authority.port, 'connect'))
      return void client.end(rawAnswer(403, 'ERR_BLOCKED_BY_CLIENT'));
    const resolution = await resolveChecked(authority.host, authority.port, this.#guard);
    if (!resolution.ok) return void client.end(this.#refuse(resolution, authority.port, 'connect').raw);
    this.#splice(client, resolution, authority.port, head, 'HTTP/1.1 200 Connection Established\r\n\r\n');
  }

  async #upgrade(incoming: IncomingMessage, client: Duplex, head: Buffer, gate: OriginGate): Promise<void> {
    this.#track(client);
    client.on('error', () => client.destroy());
    const url = absoluteHttpUrl(incoming.url);
    if (!url) return void client.end(rawAnswer(400));
    const port = portOf(url);
    if (!this.#admits(gate, [url.origin], url.hostname, port, 'upgrade'))
      return void client.end(rawAnswer(403, 'ERR_BLOCKED_BY_CLIENT'));
    const resolution = await resolveChecked(url.hostname, port, this.#guard);
    if (!resolution.ok) return void client.end(this.#refuse(resolution, port, 'upgrade').raw);
    const headers = forwardedHeaders(incoming.rawHeaders, new Set(['connection', 'upgrade']));
    const lines = [`${incoming.method} ${url.pathname}${url.search} HTTP/1.1`];
    for (let i = 0; i < headers.length; i += 2) lines.push(`${headers[i]}: ${headers[i + 1]}`);
    this.#splice(client, resolution, port, head, '', `${lines.join('\r\n')}\r\n\r\n`);
  }

  /** Connects to a judged address and joins the two sockets; `greeting` goes to the client first. */
  #splice(
    client: Duplex,
    resolution: Extract<Resolution, { ok: true }>,
    port: number,
    head: Buffer,
    greeting: string,
    preface = '',
  ): void {
    const upstream = connect({
      host: resolution.host,
      port,
      lookup: pinnedLookup(resolution.addresses),
      autoSelectFamily: true,
    });
    this.#track(upstream);
    let connected = false;
    const timer = setTimeout(() => upstream.destroy(timedOut()), this.#connectTimeoutMs);
    upstream.once('connect', () => {
      connected = true;
      clearTimeout(timer);
      if (greeting) client.write(greeting);
      if (preface) upstream.write(preface);
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (connected) client.destroy();
      else client.end(fault(error.code === 'ETIMEDOUT' ? 504 : 502, neverConnectedError(error)).raw);
    });
    upstream.on('close', () => {
      if (connected) client.destroy();
    });
    client.on('error', () => upstream.destroy());
    client.on('close', () => upstream.destroy());
  }

  /** Whether a door lets a request to any of `candidates` (origins) through; a refusal is counted and logged. */
  #admits(
    gate: OriginGate,
    candidates: readonly string[],
    host: string,
    port: number,
    kind: string,
  ): boolean {
    if (gate.origins === null || candidates.some((origin) => gate.origins?.has(origin))) return true;
    gate.onRefused();
    this.#log.debug({ host, port, kind, reason: 'origin_not_allowed' }, 'egress refused');
    return false;
  }

  /** A refusal or a name that did not resolve: logged (refusals only, host and port only), then answered. */
  #refuse(resolution: Extract<Resolution, { ok: false }>, port: number, kind: string) {
    if (resolution.why === 'private_address' || resolution.why === 'own_port') {
      this.#log.debug({ host: resolution.host, port, kind, reason: resolution.why }, 'egress refused');
      return fault(403, 'ERR_BLOCKED_BY_ADMINISTRATOR');
    }
    return resolution.why === 'malformed'
      ? fault(400, 'ERR_INVALID_URL')
      : fault(502, 'ERR_NAME_NOT_RESOLVED');
  }

  #watchConnect(socket: Socket, upstream: ReturnType<typeof request>): void {
    if (!socket.connecting) return;
    this.#track(socket);
    const timer = setTimeout(() => upstream.destroy(timedOut()), this.#connectTimeoutMs);
    socket.once('connect', () => clearTimeout(timer));
    socket.once('close', () => clearTimeout(timer));
  }

  #track(socket: Duplex): void {
    if (this.#sockets.has(socket)) return;
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
  }
}

/** What a listener lets through besides the address guard: its door's origins (null: any), and whom it tells of a refusal. */
interface OriginGate {
  readonly origins: ReadonlySet<string> | null;
  readonly onRefused: () => void;
}

/** One browser context's way out (see {@link EgressProxy.open}). */
export interface EgressDoor {
  /** The proxy server for the context's launch options (`http://127.0.0.1:PORT`). */
  readonly url: string;
  /** How many requests the door refused for their origin so far. */
  refused(): number;
  /** Stops listening and ends the door's connections; idempotent. */
  close(): Promise<void>;
}

function listenOnLoopback(server: Server): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
}

/** The origins a CONNECT to `host:port` may serve: https (wss), or http (ws) on that port. */
function tunnelOrigins(authority: { host: string; port: number }): string[] {
  const host =
    authority.host.includes(':') && !authority.host.startsWith('[') ? `[${authority.host}]` : authority.host;
  const origins: string[] = [];
  for (const scheme of ['https', 'http']) {
    try {
      origins.push(new URL(`${scheme}://${host}:${authority.port}`).origin);
    } catch {
      // A host no URL can hold is no allowed origin's.
    }
  }
  return origins;
}

const STATUS_TEXT: Record<number, [string, string]> = {
  400: ['Bad Request', 'malformed'],
  403: ['Forbidden', 'refused'],
  502: ['Bad Gateway', 'unreachable'],
  504: ['Gateway Timeout', 'timeout'],
};

/**
 * An answer of the proxy's own: a status and the `leasehold-egress` word, no body; where no
 * connection to the site was ever made, `leasehold-egress-error` names what the browser itself
 * would have said had it connected directly (its `ERR_…` name), so a navigation that never reached
 * a server is told as one (a plain-http request gets this answer as its page; a CONNECT's refusal
 * fails the load with ERR_TUNNEL_CONNECTION_FAILED and the header goes unseen).
 */
function fault(status: number, neverSent: string | null = null) {
  const [, word] = STATUS_TEXT[status] ?? ['', 'unreachable'];
  // A few words of its own, never the fleet's: Chromium fails an error status with no body as a
  // navigation error of its own (ERR_HTTP_RESPONSE_CODE_FAILURE), hiding the header.
  const body = `Not reached: ${word}${neverSent ? ` (${neverSent})` : ''}.\n`;
  return {
    raw: rawAnswer(status, neverSent),
    answer(response: ServerResponse): void {
      response
        .writeHead(status, {
          'content-type': 'text/plain; charset=utf-8',
          'content-length': Buffer.byteLength(body),
          'leasehold-egress': word,
          ...(neverSent ? { 'leasehold-egress-error': neverSent } : {}),
        })
        .end(body);
    },
  };
}

/** The browser's name for a failure to connect at all; null once the connection was made. */
function neverConnectedError(error: NodeJS.ErrnoException): string | null {
  switch (error.code) {
    case 'ECONNREFUSED':
      return 'ERR_CONNECTION_REFUSED';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'ERR_ADDRESS_UNREACHABLE';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'ERR_NAME_NOT_RESOLVED';
    case 'ECONNABORTED':
    case 'ETIMEDOUT':
      // The proxy's own connect timer (timedOut) and the kernel's both fire before any byte went.
      return error.syscall === 'connect' ? 'ERR_CONNECTION_TIMED_OUT' : null;
    default:
      return error instanceof AddressRefused ? 'ERR_BLOCKED_BY_ADMINISTRATOR' : null;
  }
}

function rawAnswer(status: number, neverSent: string | null = null): string {
  const [text, word] = STATUS_TEXT[status] ?? ['Bad Gateway', 'unreachable'];
  const error = neverSent ? `leasehold-egress-error: ${neverSent}\r\n` : '';
  return `HTTP/1.1 ${status} ${text}\r\ncontent-length: 0\r\nleasehold-egress: ${word}\r\n${error}connection: close\r\n\r\n`;
}

function timedOut(): Error {
  return Object.assign(new Error('the connection took too long'), { code: 'ETIMEDOUT', syscall: 'connect' });
}

/** A lookup that answers only the addresses already judged, whatever it is asked. */
function pinnedLookup(addresses: readonly CheckedAddress[]): LookupFunction {
  return (_hostname, options, callback) => {
    if (options.all) {
      (callback as unknown as (error: null, all: readonly CheckedAddress[]) => void)(null, addresses);
      return;
    }
    const first = addresses[0] as CheckedAddress;
    callback(null, first.address, first.family);
  };
}

/** An absolute-form request target (`http://host[:port]/path`), the only form a proxy is asked in. */
function absoluteHttpUrl(target: string | undefined): URL | undefined {
  if (!target || !/^http:\/\//i.test(target)) return undefined;
  try {
    const url = new URL(target);
    return url.username || url.password ? undefined : url;
  } catch {
    return undefined;
  }
}

/**
 * A CONNECT authority, `host:port` or `[v6]:port`, read strictly: it arrives unparsed, so odd
 * spellings (`0x7f.1:443`, `2130706433:443`) go through {@link canonicalHost} like a URL's host.
 */
export function parseAuthority(authority: string): { host: string; port: number } | undefined {
  const match = /^(\[[0-9A-Fa-f:.]+\]|[^\s:/?#@[\]]+):(\d{1,5})$/.exec(authority);
  if (!match) return undefined;
  const port = Number(match[2]);
  const host = canonicalHost(match[1] as string);
  if (host === undefined || port < 1 || port > 65_535) return undefined;
  return { host, port };
}

/** The raw header list without hop-by-hop headers, nor those the Connection header names. */
function forwardedHeaders(raw: readonly string[], keep: ReadonlySet<string> = new Set()): string[] {
  const named = new Set<string>();
  for (let i = 0; i < raw.length; i += 2)
    if (raw[i]?.toLowerCase() === 'connection')
      for (const token of (raw[i + 1] ?? '').split(',')) named.add(token.trim().toLowerCase());
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] ?? '').toLowerCase();
    if (!keep.has(name) && (HOP_BY_HOP.has(name) || named.has(name) || name.startsWith(OWN_HEADER))) continue;
    out.push(raw[i] as string, raw[i + 1] ?? '');
  }
  return out;
}
