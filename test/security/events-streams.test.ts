import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { monitorRedis } from '../fixtures/redis.js';
import { type ApiRig, startApiRig } from './api-rig.js';

/** An open SSE stream: the text received so far, and how to stop it. */
interface OpenStream {
  status: number;
  text: () => string;
  ended: Promise<void>;
  close(): void;
}

async function openStream(
  url: string,
  key: string,
  headers: Record<string, string> = {},
): Promise<OpenStream> {
  const abort = new AbortController();
  const response = await fetch(url, {
    headers: { authorization: `Bearer ${key}`, ...headers },
    signal: abort.signal,
  });
  let received = '';
  const ended = (async () => {
    if (!response.body) return;
    const decoder = new TextDecoder();
    const reader = response.body.getReader();
    try {
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
        received += decoder.decode(chunk.value, { stream: true });
    } catch {
      // Aborted by close().
    }
  })();
  return { status: response.status, text: () => received, ended, close: () => abort.abort() };
}

async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Commands Redis runs on keys under `prefix` while `during` runs (MONITOR, filtered by prefix). */
async function commandsOnPrefix(prefix: string, during: () => Promise<void>): Promise<string[]> {
  const seen: string[] = [];
  const monitor = await monitorRedis((args) => {
    if (args.some((arg) => String(arg).includes(prefix))) seen.push(args.slice(0, 2).join(' '));
  });
  try {
    await during();
  } finally {
    await monitor.stop();
  }
  return seen;
}

/**
 * `GET /v1/runs/{id}/events?after=garbage` never answered (the
 * id was checked after the reply was hijacked), streams were unlimited, and each polled Redis
 * twice every 250 ms. Ids are checked first, a key holds at most 20 streams, and new events reach
 * streams by a notification on the run's own channel, read with one range read.
 */
describe('run event streams', { timeout: 60_000 }, () => {
  let rig: ApiRig;
  let key: string;
  let sessionPath: string;

  beforeAll(async () => {
    rig = await startApiRig('events');
    key = await rig.key('ev', 'alice', ['admin']);
    const agent = await rig.call('POST', '/v1/agents', {
      key,
      body: { model: 'scripted', instructions: 'e' },
    });
    const session = await rig.call('POST', '/v1/sessions', { key, body: { agent_id: agent.body.id } });
    sessionPath = `/v1/sessions/${session.body.id}/runs`;
  });
  afterAll(() => rig?.close());

  const submit = async () =>
    (await rig.call('POST', sessionPath, { key, body: { input: 'stream me' } })).body.id as string;
  const eventsUrl = (runId: string, query = '') => `${rig.api.url}/v1/runs/${runId}/events${query}`;

  it('answers a garbage `after` or Last-Event-ID with 400 in the one error shape, at once', async () => {
    const runId = await submit();
    for (const [query, headers] of [
      ['?after=garbage', {}],
      ['', { 'last-event-id': 'nope' }],
      ['?after=1-2-3', {}],
    ] as const) {
      const started = Date.now();
      const answer = await rig.call('GET', `/v1/runs/${runId}/events${query}`, { key, headers });
      expect(answer.status).toBe(400);
      expect(answer.body).toEqual({
        error: { code: 'bad_request', message: expect.stringMatching(/event id/) },
      });
      expect(Date.now() - started).toBeLessThan(2_000);
    }
  });

  it("delivers a new event to an open stream by notification, and ends the stream at the run's end", async () => {
    const runId = await submit();
    const stream = await openStream(eventsUrl(runId), key);
    expect(stream.status).toBe(200);
    await until(() => stream.text().includes('run.submitted'));
    const owner = `owner-${runId}`;
    expect((await rig.api.store.claimRun(runId, 1, owner)).ok).toBe(true);
    await until(() => stream.text().includes('run.claimed'), 2_000);
    await rig.api.store.appendEvent(runId, owner, 'message', { text: 'hello' });
    await until(() => stream.text().includes('"hello"'), 2_000);
    await rig.api.store.finishRun(runId, owner, { status: 'succeeded', result: 'done' });
    await stream.ended;
    expect(stream.text()).toMatch(/event: run\.succeeded/);
    // Resuming after the last id seen sends only what came later.
    const lastId = [...stream.text().matchAll(/^id: (\S+)$/gm)].at(-1)?.[1] as string;
    const resumed = await rig.call('GET', `/v1/runs/${runId}/events`, {
      key,
      headers: { 'last-event-id': lastId },
    });
    expect(resumed.status).toBe(200);
  });

  it('refuses a 21st open stream of one key with 429 rate_limited, and takes one again after a close', async () => {
    const streamer = await rig.key('ev', 'streamer', ['runs:read', 'runs:write']);
    const runId = await submit();
    const streams = await Promise.all(
      Array.from({ length: 20 }, () => openStream(eventsUrl(runId), streamer)),
    );
    expect(streams.map((stream) => stream.status)).toEqual(Array(20).fill(200));
    const refused = await rig.call('GET', `/v1/runs/${runId}/events`, { key: streamer });
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('rate_limited');
    // Another key is not held to this key's count.
    const other = await openStream(eventsUrl(runId), key);
    expect(other.status).toBe(200);
    other.close();
    streams[0]?.close();
    await until(async () => (await openStreamStatus(eventsUrl(runId), streamer)) === 200);
    for (const stream of streams) stream.close();
  });

  it("counts a key's streams across API replicas", async () => {
    const replica = await startApiRig('events-replica', {}, rig.prefix);
    try {
      const streamer = await rig.key('ev', 'two-replicas', ['runs:read', 'runs:write']);
      const runId = await submit();
      const here = await Promise.all(
        Array.from({ length: 12 }, () => openStream(eventsUrl(runId), streamer)),
      );
      const replicaUrl = `${replica.api.url}/v1/runs/${runId}/events`;
      const there = await Promise.all(Array.from({ length: 8 }, () => openStream(replicaUrl, streamer)));
      expect([...here, ...there].every((stream) => stream.status === 200)).toBe(true);
      expect((await replica.call('GET', `/v1/runs/${runId}/events`, { key: streamer })).status).toBe(429);
      expect((await rig.call('GET', `/v1/runs/${runId}/events`, { key: streamer })).status).toBe(429);
      for (const stream of [...here, ...there]) stream.close();
    } finally {
      await replica.close();
    }
  });

  it('frees the slots of a replica that died holding streams once they expire', async () => {
    const streamer = await rig.key('ev', 'orphaned', ['runs:read']);
    const keyId = (await rig.api.store.resolveApiKey(streamer))?.key_id;
    const runId = await submit();
    // Twenty slots as a dead replica leaves them: no one renews them, they lapse in 300 ms.
    const expiresAtMs = Date.now() + 300;
    await rig.redis.zadd(
      `${rig.prefix}:apikey:{streams:${keyId}}`,
      ...Array.from({ length: 20 }, (_, index) => [expiresAtMs, `dead-replica:${index}`]).flat(),
    );
    expect((await rig.call('GET', `/v1/runs/${runId}/events`, { key: streamer })).status).toBe(429);
    // A refused open holds no slot, so trying again until one is taken waits for the lapse alone.
    await expect.poll(() => openStreamStatus(eventsUrl(runId), streamer)).toBe(200);
    const stream = await openStream(eventsUrl(runId), streamer);
    expect(stream.status).toBe(200);
    stream.close();
  });

  async function openStreamStatus(url: string, streamKey: string): Promise<number> {
    const stream = await openStream(url, streamKey);
    stream.close();
    return stream.status;
  }

  it('holds 200 open streams without slowing /healthz much and without polling Redis per stream', async () => {
    const runId = await submit();
    const healthP50 = async () => {
      const times: number[] = [];
      for (let i = 0; i < 40; i++) {
        const started = performance.now();
        await fetch(`${rig.api.url}/healthz`);
        times.push(performance.now() - started);
      }
      return times.sort((a, b) => a - b)[20] ?? 0;
    };
    const baselineMs = await healthP50();
    const keys = await Promise.all(
      Array.from({ length: 10 }, (_, index) => rig.key('ev', `crowd-${index}`, ['runs:read'])),
    );
    const streams = (
      await Promise.all(
        keys.map((crowdKey) =>
          Promise.all(Array.from({ length: 20 }, () => openStream(eventsUrl(runId), crowdKey))),
        ),
      )
    ).flat();
    expect(streams.filter((stream) => stream.status === 200)).toHaveLength(200);
    await until(() => streams.every((stream) => stream.text().includes('run.submitted')));

    // Nothing but time can show an absence: in one idle second, 200 streams that each polled Redis
    // even once would run 200 commands; at most a handful may run.
    const commands = await commandsOnPrefix(
      rig.prefix,
      () => new Promise((resolve) => setTimeout(resolve, 1_000)),
    );
    const withStreamsMs = await healthP50();
    console.log(
      JSON.stringify({
        healthz_p50_ms: withStreamsMs,
        baseline_p50_ms: baselineMs,
        idle_second_commands: commands.length,
      }),
    );
    expect(commands.length).toBeLessThanOrEqual(5);
    expect(withStreamsMs).toBeLessThan(baselineMs * 3 + 5);

    // One event reaches all 200 streams of the run with one range read, not one per stream.
    const owner = `owner-${runId}`;
    const onEvent = await commandsOnPrefix(rig.prefix, async () => {
      await rig.api.store.claimRun(runId, 1, owner);
      await until(() => streams.every((stream) => stream.text().includes('run.claimed')), 5_000);
    });
    const reads = onEvent.filter((command) => command.toLowerCase().startsWith('xrange'));
    console.log(JSON.stringify({ streams: 200, xrange_per_event: reads.length }));
    expect(reads.length).toBeGreaterThanOrEqual(1);
    expect(reads.length).toBeLessThanOrEqual(3);
    for (const stream of streams) stream.close();
  });
});
