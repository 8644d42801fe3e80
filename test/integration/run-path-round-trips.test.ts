import { QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { runJobId } from '../../queues/index.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { countRedisWrites, type RedisWriteCounter } from '../fixtures/redis-writes.js';
import { restClient } from '../fixtures/rest.js';

const RUNS = 10;

/** Writes (round trips) and commands summed over the connections whose name starts with `role`. */
function sumOf(counter: RedisWriteCounter, role: string): { writes: number; commands: number } {
  let writes = 0;
  let commands = 0;
  for (const [name, count] of counter.counts())
    if (name.startsWith(`leasehold:${role}`)) {
      writes += count.writes;
      commands += count.commands;
    }
  return { writes, commands };
}

describe('the run path sends few requests to Redis', () => {
  let fleet: FleetHandle;
  let events: QueueEvents;
  let eventsConnection: Redis;
  const counter = countRedisWrites();
  const { call } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    const prefix = uniquePrefix('round-trips');
    fleet = await startTestFleet(prefix);
    eventsConnection = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
    events = new QueueEvents('runs', { connection: eventsConnection, prefix });
    await events.waitUntilReady();
  });

  afterAll(async () => {
    counter.stop();
    await events?.close();
    eventsConnection?.disconnect();
    await fleet?.close();
  });

  /** Submits a scripted run and waits for its job to complete; answers the API's and the worker's counts. */
  async function oneRun(sessionId: string) {
    const completed = new Set<string>();
    let wanted = '';
    let done!: () => void;
    const finished = new Promise<void>((resolve) => {
      done = resolve;
    });
    const onCompleted = ({ jobId }: { jobId: string }) => {
      completed.add(jobId);
      if (jobId === wanted) done();
    };
    events.on('completed', onCompleted);
    counter.reset();
    const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
      input: 'hello',
      script: { steps: [], answer: 'hi' },
    });
    expect(submitted.status).toBe(201);
    const api = sumOf(counter, 'api');
    wanted = runJobId(submitted.body.id, 1);
    if (!completed.has(wanted)) await finished;
    events.off('completed', onCompleted);
    if (process.env.DEBUG_ROUND_TRIPS)
      process.stderr.write(`${JSON.stringify([...counter.commandNames()])}\n`);
    return { api, worker: sumOf(counter, 'run') };
  }

  /** Ten runs after a warm-up: the API's and the run worker's writes and commands, per run. */
  async function perRun() {
    const agent = await call('POST', '/v1/agents', { model: 'scripted', instructions: 'answer' });
    const session = await call('POST', '/v1/sessions', { agent_id: agent.body.id });
    await oneRun(session.body.id);
    const api = { writes: 0, commands: 0 };
    const worker = { writes: 0, commands: 0 };
    for (let index = 0; index < RUNS; index += 1) {
      const counts = await oneRun(session.body.id);
      api.writes += counts.api.writes;
      api.commands += counts.api.commands;
      worker.writes += counts.worker.writes;
      worker.commands += counts.worker.commands;
    }
    const names = JSON.stringify([...counter.commandNames()]);
    return {
      api: { writes: api.writes / RUNS, commands: api.commands / RUNS },
      worker: { writes: worker.writes / RUNS, commands: worker.commands / RUNS },
      names,
    };
  }

  let measured: Awaited<ReturnType<typeof perRun>> | undefined;
  const measure = async () => {
    measured ??= await perRun();
    return measured;
  };

  it('submits a run in 4 round trips: the key, the request limit, the session, and the run stored with its job', async () => {
    const { api, names } = await measure();
    // The session is read afresh (a cached one could be a session deleted since); the job still
    // goes in the round trip that stores the run, where it once took a round trip of its own.
    expect(api.writes, names).toBeLessThanOrEqual(4);
  });

  it('runs a scripted answer, claim to finish, in at most 13 round trips from its run worker', async () => {
    const { worker, names } = await measure();
    // Once 16 (the transcript read after the claim, the attempt read before the end,
    // the run read again after it).
    expect(worker.writes, names).toBeLessThanOrEqual(13);
  });
});
