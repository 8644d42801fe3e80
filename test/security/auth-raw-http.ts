import { connect } from 'node:net';

/** One HTTP answer read off the socket as it came. */
export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: answers of many shapes, asserted field by field in tests.
  json: any;
}

/**
 * Sends one request exactly as written — request target, method and headers untouched — over a
 * plain socket, so spellings a client library would normalise (`%76`, `//`, absolute form) really
 * reach the server.
 */
export function rawRequest(
  baseUrl: string,
  method: string,
  target: string,
  options: { headers?: Record<string, string>; body?: string } = {},
): Promise<RawAnswer> {
  const { hostname, port } = new URL(baseUrl);
  const headers: Record<string, string> = {
    host: `${hostname}:${port}`,
    connection: 'close',
    ...options.headers,
  };
  if (options.body !== undefined) headers['content-length'] = String(Buffer.byteLength(options.body));
  const head = `${method} ${target} HTTP/1.1\r\n${Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')}\r\n`;
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname === 'localhost' ? '127.0.0.1' : hostname);
    const chunks: Buffer[] = [];
    socket.setTimeout(10_000, () => socket.destroy(new Error(`no answer to ${method} ${target}`)));
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('end', () => {
      const raw = Buffer.concat(chunks);
      const split = raw.indexOf('\r\n\r\n');
      const [statusLine = '', ...headerLines] = raw.subarray(0, split).toString('latin1').split('\r\n');
      const answerHeaders: Record<string, string> = {};
      for (const line of headerLines) {
        const colon = line.indexOf(':');
        answerHeaders[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const payload = raw.subarray(split + 4);
      const text = (answerHeaders['transfer-encoding'] === 'chunked' ? unchunk(payload) : payload).toString(
        'utf8',
      );
      let json: unknown;
      try {
        json = text ? JSON.parse(text) : undefined;
      } catch {
        json = undefined;
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers: answerHeaders, text, json });
    });
    socket.write(head + (options.body ?? ''));
  });
}

function unchunk(payload: Buffer): Buffer {
  const parts: Buffer[] = [];
  let rest = payload;
  for (;;) {
    const lineEnd = rest.indexOf('\r\n');
    const size = Number.parseInt(rest.subarray(0, lineEnd).toString('latin1'), 16);
    if (!size) return Buffer.concat(parts);
    parts.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
    rest = rest.subarray(lineEnd + 2 + size + 2);
  }
}

/** The one error shape: `{"error":{"code","message"}}`, a code and a message only (plus details). */
export function isOneErrorShape(answer: RawAnswer, code?: string): boolean {
  const error = answer.json?.error;
  return (
    typeof error?.code === 'string' &&
    typeof error.message === 'string' &&
    Object.keys(answer.json).length === 1 &&
    (code === undefined || error.code === code)
  );
}
