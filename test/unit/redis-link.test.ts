import { EventEmitter } from 'node:events';
import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { frameworkErrorAnswer } from '../../libs/telemetry/http-errors.js';
import { isRedisUnreachable, RedisLink } from '../../libs/telemetry/redis-link.js';

function lines() {
  const seen: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      seen.push(JSON.parse(chunk.toString()));
      done();
    },
  });
  return { seen, logger: pino({ level: 'info' }, sink) };
}

const refused = () =>
  Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6390'), { code: 'ECONNREFUSED' });

describe('the Redis link watch', () => {
  it('logs one line when the first connection drops and one when the last is back, however often they retry', () => {
    const { seen, logger } = lines();
    const link = new RedisLink();
    link.reportTo(logger);
    const [a, b] = [new EventEmitter(), new EventEmitter()];
    link.watch(a, 'a');
    link.watch(b, 'b');
    for (let attempt = 0; attempt < 5; attempt += 1) {
      a.emit('reconnecting');
      a.emit('error', refused());
      b.emit('error', refused());
    }
    expect(link.up).toBe(false);
    a.emit('ready');
    expect(link.up).toBe(false);
    b.emit('ready');
    expect(link.up).toBe(true);
    expect(seen.map((line) => line.redis)).toEqual(['down', 'up']);
    expect(seen[0]).toMatchObject({ connection: 'a' });
  });

  it('forgets a connection closed on purpose, so it does not hold the process unready', () => {
    const link = new RedisLink();
    const client = new EventEmitter();
    link.watch(client, 'closing');
    client.emit('reconnecting');
    client.emit('end');
    expect(link.up).toBe(true);
  });

  it('takes a connection that stays open but leaves its pings unanswered for down, once, and up when one is answered', async () => {
    const { seen, logger } = lines();
    const link = new RedisLink();
    link.reportTo(logger);
    link.configure(200);
    let frozen = true;
    const thawed: Array<() => void> = [];
    const client = Object.assign(new EventEmitter(), {
      status: 'ready',
      ping: () =>
        new Promise((resolve) => {
          if (frozen) thawed.push(() => resolve('PONG'));
          else resolve('PONG');
        }),
    });
    link.watch(client, 'frozen');
    while (link.up) await new Promise((resolve) => setTimeout(resolve, 20));
    const back = link.whenUp();
    // Nothing but time can show an absence: pings keep going out while it is down, and in 500 ms
    // (two and a half answer bounds) two more are left unanswered for the whole bound; none adds a line.
    await new Promise((resolve) => setTimeout(resolve, 500));
    frozen = false;
    for (const answer of thawed.splice(0)) answer();
    await back;
    client.emit('end');
    expect(seen.map((line) => line.redis)).toEqual(['down', 'up']);
    expect(seen[0]).toMatchObject({ connection: 'frozen', code: 'ETIMEDOUT' });
  });

  it('knows an unreachable Redis by its code, by ioredis messages and through causes', () => {
    expect(isRedisUnreachable(refused())).toBe(true);
    expect(
      isRedisUnreachable(new Error("Stream isn't writeable and enableOfflineQueue options is false")),
    ).toBe(true);
    expect(
      isRedisUnreachable(new Error('lookup failed', { cause: new Error('Connection is closed.') })),
    ).toBe(true);
    expect(isRedisUnreachable(new Error('Command timed out'))).toBe(true);
    expect(isRedisUnreachable(new Error('ERR unknown command'))).toBe(false);
    expect(isRedisUnreachable('ECONNREFUSED')).toBe(false);
  });
});

describe('an HTTP answer to a request that met an unreachable Redis', () => {
  it('is 503 unavailable, not 500 internal', () => {
    const error = Object.assign(new Error("Stream isn't writeable and enableOfflineQueue options is false"), {
      code: undefined as unknown as string,
    });
    expect(frameworkErrorAnswer(error, 1024)).toEqual({
      status: 503,
      body: { error: { code: 'unavailable', message: 'the store did not answer; retry shortly' } },
    });
    expect(frameworkErrorAnswer(Object.assign(new Error('boom'), { code: 'X' }), 1024)).toMatchObject({
      status: 500,
      body: { error: { code: 'internal' } },
    });
  });
});
