import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/**
 * Ioredis copies every script defined on a client onto each pipeline it makes, and an
 * auto-pipelined connection makes one per tick; with BullMQ's scripts and the store's on one
 * connection that copy was most of a pipeline's cost. A connection from `connectRedis` shares its
 * scripts with its pipelines instead — and every way of calling a script still works.
 */
type Scripted = Redis & {
  echoKey(key: string, value: string): Promise<string[]>;
};

function ownScriptProperties(pipeline: object, names: readonly string[]): string[] {
  return names.filter((name) => Object.hasOwn(pipeline, name) || Object.hasOwn(pipeline, `${name}Buffer`));
}

describe('a connection shares its scripts with its pipelines', () => {
  const prefix = uniquePrefix('shared-scripts');
  const names = Array.from({ length: 40 }, (_, index) => `script${index}`);
  let client: Scripted;
  let batched: Scripted;

  beforeAll(async () => {
    client = (await connectRedis(testRedisUrl(), 'producer', 'test-shared-scripts')) as Scripted;
    batched = (await connectRedis(testRedisUrl(), 'producer', 'test-shared-scripts-batched', {
      autoPipelining: true,
    })) as Scripted;
    for (const connection of [client, batched]) {
      for (const [index, name] of names.entries())
        connection.defineCommand(name, { numberOfKeys: 1, lua: `return ${index}` });
      connection.defineCommand('echoKey', { numberOfKeys: 1, lua: 'return {KEYS[1], ARGV[1]}' });
    }
  });

  afterAll(async () => {
    await closeRedis(client);
    await closeRedis(batched);
  });

  it('makes pipelines and transactions that copy none of its scripts', () => {
    expect(ownScriptProperties(client.pipeline(), [...names, 'echoKey'])).toEqual([]);
    expect(ownScriptProperties(client.multi(), [...names, 'echoKey'])).toEqual([]);
  });

  it('runs a script alone, in a pipeline, in a transaction and auto-pipelined', async () => {
    const key = `${prefix}:k`;
    expect(await client.echoKey(key, 'alone')).toEqual([key, 'alone']);
    const piped = client.pipeline() as unknown as {
      echoKey(k: string, v: string): unknown;
      exec(): Promise<unknown>;
    };
    piped.echoKey(key, 'piped');
    expect(await piped.exec()).toEqual([[null, [key, 'piped']]]);
    const multi = client.multi() as unknown as {
      echoKey(k: string, v: string): unknown;
      exec(): Promise<unknown>;
    };
    multi.echoKey(key, 'multi');
    expect(await multi.exec()).toEqual([[null, [key, 'multi']]]);
    const together = await Promise.all([batched.echoKey(key, 'a'), batched.echoKey(key, 'b')]);
    expect(together).toEqual([
      [key, 'a'],
      [key, 'b'],
    ]);
  });

  it('shares a script defined after the connection was made', async () => {
    client.defineCommand('later', { numberOfKeys: 0, lua: 'return "later"' });
    const piped = client.pipeline() as unknown as { later(): unknown; exec(): Promise<unknown> };
    expect(ownScriptProperties(piped, ['later'])).toEqual([]);
    piped.later();
    expect(await piped.exec()).toEqual([[null, 'later']]);
    // A transaction not pipelined is a plain MULTI on the connection, as before.
    expect(await client.multi({ pipeline: false })).toBe('OK');
    expect(await client.discard()).toBe('OK');
  });
});
