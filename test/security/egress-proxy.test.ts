import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EgressGuard, EgressProxy } from '../../libs/egress/index.js';
import { LoopbackSite } from './egress-rig.js';

/** Reads from `socket` until `done(text)` holds or it closes; the text read. */
async function readUntil(socket: Socket, done: (text: string) => boolean): Promise<string> {
  let text = '';
  socket.setEncoding('utf8');
  return new Promise((resolve) => {
    const finish = () => resolve(text);
    socket.on('data', (chunk: string) => {
      text += chunk;
      if (done(text)) {
        socket.off('close', finish);
        resolve(text);
      }
    });
    socket.once('close', finish);
  });
}

async function openSocket(port: number): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  return socket;
}

/**
 * The egress proxy on its own, spoken to over raw sockets as Chromium speaks to it: the fleet
 * allows 127.0.0.2 only; a TCP stand-in on 127.0.0.1 counts every connection that reaches it.
 */
describe('the egress proxy', () => {
  const logged: Record<string, unknown>[] = [];
  let proxy: EgressProxy;
  let guard: EgressGuard;
  let site: LoopbackSite;
  let standIn: Server;
  let standInPort: number;
  let reached = 0;

  beforeAll(async () => {
    guard = new EgressGuard({ allowCidrs: ['127.0.0.2/32'], ownPorts: [] });
    proxy = await EgressProxy.start({ guard, log: { debug: (fields) => logged.push(fields) } });
    site = await LoopbackSite.start('127.0.0.2');
    site.page('/hello', 'hello');
    standIn = createServer((socket) => {
      reached += 1;
      socket.destroy();
    });
    await new Promise<void>((resolve) => standIn.listen(0, '127.0.0.1', resolve));
    standInPort = (standIn.address() as { port: number }).port;
  });

  afterAll(async () => {
    await proxy?.close();
    await site?.close();
    await new Promise<void>((resolve) => standIn.close(() => resolve()));
  });

  it('answers a CONNECT to a refused address 403 in every spelling of its authority, and logs host and port only', async () => {
    for (const host of [
      '127.0.0.1',
      '0x7f.1',
      '2130706433',
      '0177.0.0.1',
      '127.1',
      '[::ffff:127.0.0.1]',
      '[::127.0.0.1]',
      '[::ffff:0:127.0.0.1]',
      'x.localhost',
    ]) {
      const socket = await openSocket(proxy.port);
      socket.write(`CONNECT ${host}:${standInPort} HTTP/1.1\r\nhost: ${host}:${standInPort}\r\n\r\n`);
      const answer = await readUntil(socket, (text) => text.includes('\r\n\r\n'));
      expect({ host, line: answer.split('\r\n')[0] }).toEqual({ host, line: 'HTTP/1.1 403 Forbidden' });
      socket.destroy();
    }
    expect(reached).toBe(0);
    expect(logged.length).toBeGreaterThanOrEqual(9);
    for (const fields of logged)
      expect(Object.keys(fields).sort()).toEqual(['host', 'kind', 'port', 'reason']);
  });

  it('tunnels a CONNECT to an allowed address, bytes both ways', async () => {
    const socket = await openSocket(proxy.port);
    socket.write(`CONNECT 127.0.0.2:${site.port} HTTP/1.1\r\nhost: 127.0.0.2:${site.port}\r\n\r\n`);
    let text = '';
    socket.setEncoding('utf8');
    const established = new Promise<void>((resolve) => {
      socket.on('data', (chunk: string) => {
        text += chunk;
        if (text.includes('\r\n\r\n')) resolve();
      });
    });
    await established;
    expect(text).toBe('HTTP/1.1 200 Connection Established\r\n\r\n');
    const answered = new Promise<void>((resolve) =>
      socket.on('data', () => text.includes('hello') && resolve()),
    );
    socket.write(`GET /hello HTTP/1.1\r\nhost: 127.0.0.2:${site.port}\r\n\r\n`);
    await answered;
    expect(text).toMatch(/HTTP\/1\.1 200 OK/);
    expect(site.log).toContain('/hello');
    socket.destroy();
  });

  it('forwards absolute-form requests on one kept-alive connection, and answers a refused one 403 with a line of its own and the browser’s error name', async () => {
    const socket = await openSocket(proxy.port);
    const get = (url: string) =>
      socket.write(
        `GET ${url} HTTP/1.1\r\nhost: ${new URL(url).host}\r\nproxy-connection: keep-alive\r\n\r\n`,
      );
    const answers: string[] = [];
    let text = '';
    socket.setEncoding('utf8');
    const three = new Promise<void>((resolve) => {
      socket.on('data', (chunk: string) => {
        text += chunk;
        if (
          (text.match(/HTTP\/1\.1 /g) ?? []).length === 3 &&
          text.includes('hello', text.lastIndexOf('HTTP/1.1 200'))
        )
          resolve();
      });
    });
    get(`${site.origin}/hello`);
    get(`http://127.0.0.1:${standInPort}/secret?token=x`);
    get(`${site.origin}/hello`);
    await three;
    answers.push(...text.split(/(?=HTTP\/1\.1 )/));
    expect(answers.map((answer) => answer.split('\r\n')[0])).toEqual([
      'HTTP/1.1 200 OK',
      'HTTP/1.1 403 Forbidden',
      'HTTP/1.1 200 OK',
    ]);
    expect(answers[1]).toMatch(/leasehold-egress: refused/i);
    expect(answers[1]).toMatch(/leasehold-egress-error: ERR_BLOCKED_BY_ADMINISTRATOR/i);
    expect(answers[1]).toMatch(/\r\n\r\nNot reached: refused \(ERR_BLOCKED_BY_ADMINISTRATOR\)\.\n$/);
    expect(reached).toBe(0);
    expect(JSON.stringify(logged)).not.toContain('secret');
    socket.destroy();
  }, 15_000);

  it('closes within a bound, its open tunnels destroyed', async () => {
    const guard = new EgressGuard({ allowCidrs: ['127.0.0.2/32'], ownPorts: [] });
    const own = await EgressProxy.start({ guard, log: { debug: () => undefined } });
    const port = own.port;
    const socket = await openSocket(port);
    socket.write(`CONNECT 127.0.0.2:${site.port} HTTP/1.1\r\nhost: x\r\n\r\n`);
    await readUntil(socket, (text) => text.includes('\r\n\r\n'));
    const closed = once(socket, 'close');
    const startedMs = performance.now();
    await own.close();
    await closed;
    expect(performance.now() - startedMs).toBeLessThan(2_000);
    // Its own port is refused from the start, on every allowed address.
    expect(guard.judge('127.0.0.2', port)).toMatchObject({ allowed: false, reason: 'own_port' });
  });

  it("opens a door per context whose requests reach only that context's origins, counted when refused", async () => {
    const other = await LoopbackSite.start('127.0.0.2');
    other.page('/hello', 'other');
    const door = await proxy.open(new Set([site.origin]));
    const port = Number(new URL(door.url).port);
    try {
      // Its port is the fleet's own while it listens: no page may reach a proxy door directly.
      expect(guard.judge('127.0.0.2', port)).toMatchObject({ allowed: false, reason: 'own_port' });
      const status = async (request: string, through = port) => {
        const socket = await openSocket(through);
        socket.write(request);
        const answer = await readUntil(socket, (text) => text.includes('\r\n\r\n'));
        socket.destroy();
        return answer.split('\r\n')[0];
      };
      const host = (origin: string) => new URL(origin).host;
      expect(await status(`GET ${site.origin}/hello HTTP/1.1\r\nhost: ${host(site.origin)}\r\n\r\n`)).toBe(
        'HTTP/1.1 200 OK',
      );
      expect(
        await status(`CONNECT ${host(site.origin)} HTTP/1.1\r\nhost: ${host(site.origin)}\r\n\r\n`),
      ).toBe('HTTP/1.1 200 Connection Established');
      expect(door.refused()).toBe(0);
      for (const request of [
        `GET ${other.origin}/hello HTTP/1.1\r\nhost: ${host(other.origin)}\r\n\r\n`,
        `CONNECT ${host(other.origin)} HTTP/1.1\r\nhost: ${host(other.origin)}\r\n\r\n`,
        `GET ${other.origin}/socket HTTP/1.1\r\nhost: ${host(other.origin)}\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n`,
      ])
        expect(await status(request)).toBe('HTTP/1.1 403 Forbidden');
      expect(door.refused()).toBe(3);
      expect(other.log).toEqual([]);
      // The proxy's own listener knows no context: any origin passes the address guard there.
      expect(
        await status(`GET ${other.origin}/hello HTTP/1.1\r\nhost: ${host(other.origin)}\r\n\r\n`, proxy.port),
      ).toBe('HTTP/1.1 200 OK');
    } finally {
      await door.close();
      await other.close();
    }
    expect(guard.judge('127.0.0.2', port)).toEqual({ allowed: true });
  });
});
