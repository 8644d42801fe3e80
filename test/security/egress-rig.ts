import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A small site on one loopback address (127.0.0.2 where the fleet allows only that), its pages
 * made by the test, every request in its log. Pages that reach for a refused address say in their
 * text what became of it, so a test reads the outcome from an observation instead of waiting.
 */
export class LoopbackSite {
  readonly log: string[] = [];
  private readonly pages = new Map<
    string,
    { status: number; headers: Record<string, string>; body: string }
  >();

  private constructor(
    private readonly server: Server,
    readonly host: string,
  ) {}

  static async start(host: string): Promise<LoopbackSite> {
    let site: LoopbackSite | undefined;
    const server = createServer((request, response) => {
      const path = request.url ?? '/';
      site?.log.push(path);
      const page = site?.pages.get(path.split('?')[0] ?? '/');
      if (!page) return void response.writeHead(404, { 'content-length': 0 }).end();
      response.writeHead(page.status, { 'content-type': 'text/html', ...page.headers }).end(page.body);
    });
    server.on('upgrade', (request, socket) => {
      site?.log.push(request.url ?? '/');
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    site = new LoopbackSite(server, host);
    return site;
  }

  get origin(): string {
    return `http://${this.host}:${(this.server.address() as AddressInfo).port}`;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  page(path: string, body: string): string {
    this.pages.set(path, { status: 200, headers: {}, body: `<!doctype html><title>${path}</title>${body}` });
    return `${this.origin}${path}`;
  }

  redirect(path: string, to: string): string {
    this.pages.set(path, { status: 302, headers: { location: to }, body: '' });
    return `${this.origin}${path}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** A page whose text says whether an image from `src` loaded or failed. */
export function imagePage(src: string): string {
  return `<button id="out">image: waiting</button><img src="${src}" onload="out.textContent='image: loaded'" onerror="out.textContent='image: failed'">`;
}

/** A page whose text says when a frame of `src` finished (a refused frame finishes as an empty page). */
export function framePage(src: string): string {
  return `<button id="out">frame: waiting</button><iframe src="${src}" onload="out.textContent='frame: finished'"></iframe>`;
}

/** A page whose text says whether a WebSocket to `url` opened or failed. */
export function socketPage(url: string): string {
  return `<button id="out">socket: waiting</button><script>const s=new WebSocket(${JSON.stringify(url)});s.onopen=()=>out.textContent='socket: opened';s.onerror=()=>out.textContent='socket: failed';</script>`;
}
