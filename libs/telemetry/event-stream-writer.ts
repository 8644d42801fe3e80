import type { LiveEvent } from '../contracts/index.js';

/** A comment line the stream sends when it has been quiet this long, so proxies keep it open. */
const KEEP_ALIVE_MS = 15_000;

/**
 * One viewer's server-sent events. A frame the socket cannot take at once waits as the one newest
 * frame, replaced by any later one: a slow reader misses frames and never queues them. Other events
 * are small and rare, and always sent.
 */
export class EventStreamWriter {
  #pendingFrame: string | undefined;
  #blocked = false;
  #open = false;
  #ended = false;
  #keepAlive: NodeJS.Timeout | undefined;

  constructor(
    private readonly socket: {
      writeHead(status: number, headers: Record<string, string>): unknown;
      write(chunk: string): boolean;
      once(event: 'drain', listener: () => void): unknown;
      end(): unknown;
      flushHeaders?(): void;
    },
  ) {}

  /** Sends the stream's headers and what was told before it began. */
  begin(): void {
    this.socket.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-accel-buffering': 'no',
      connection: 'keep-alive',
    });
    this.socket.flushHeaders?.();
    this.#open = true;
    this.#keepAlive = setInterval(() => this.#write(': keep-alive\n\n'), KEEP_ALIVE_MS);
    this.#keepAlive.unref();
    this.#flush();
  }

  send(event: LiveEvent): void {
    if (this.#ended) return;
    const text = `event: ${event.event}\ndata: ${JSON.stringify(event.data)}\n\n`;
    if (event.event === 'frame') {
      this.#pendingFrame = text;
      this.#flush();
      return;
    }
    if (!this.#open) {
      this.#early.push(text);
      return;
    }
    this.#write(text);
  }

  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    clearInterval(this.#keepAlive);
    if (this.#open) this.socket.end();
  }

  readonly #early: string[] = [];

  #flush(): void {
    if (!this.#open || this.#ended) return;
    for (const text of this.#early.splice(0)) this.#write(text);
    if (this.#blocked || this.#pendingFrame === undefined) return;
    const frame = this.#pendingFrame;
    this.#pendingFrame = undefined;
    this.#write(frame);
  }

  #write(text: string): void {
    if (this.#ended) return;
    if (this.socket.write(text)) return;
    this.#blocked = true;
    this.socket.once('drain', () => {
      this.#blocked = false;
      this.#flush();
    });
  }
}
