import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue, QueueEvents, Worker } from 'bullmq';
import Fastify from 'fastify';
import { Redis } from 'ioredis';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { runJobId } from '../../queues/index.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { figure, percentile, report } from './report.js';
import { measureRunBytes } from './run-bytes.js';

const SUITE = 'runs';
/**
 * BENCH_CPU_PROF_DIR=<folder>: V8 CPU profiles there, read with test/bench/cpu-profile-top.ts —
 * `api-submit.cpuprofile`, this process (the API and the bench's client) over the timed runs, and
 * the run worker's process over its whole life (`--last-ms` keeps the timed runs). Profiling slows
 * what it profiles: figures of such a run are for finding where time goes, not for comparing.
 */
const CPU_PROFILE_DIR = process.env.BENCH_CPU_PROF_DIR;
/**
 * Microseconds between samples. V8's default (1,000) is coarse beside a run's few milliseconds, and
 * on a busy machine a sample taken late is charged to whatever runs then.
 */
const PROFILE_INTERVAL_US = 200;
const RUNS = 400;
const CONCURRENCY = 50;

/**
 * CPU milliseconds a process has used (user + system), read from /proc: the run worker is a child
 * process. CPU per run does not depend on what else the machine is doing, as runs per second does.
 */
function processCpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  // utime and stime are the 12th and 13th fields after the command's name, in clock ticks (100/s).
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

function ownCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/**
 * CPU milliseconds the Redis server has used (INFO cpu, user + system, the main thread's and its
 * helpers'). The bench is the server's only client while it runs, so the difference over a timed
 * part is that part's Redis cost: what a run costs is the API's, the run worker's and this together.
 */
async function redisCpuMs(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const seconds = (field: string) =>
    Number(new RegExp(`^${field}:([0-9.]+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  return (seconds('used_cpu_user') + seconds('used_cpu_sys')) * 1000;
}

/** The cores this machine has: with every process busy, runs per second cannot pass cores / CPU per run. */
const CORES = availableParallelism();

/**
 * Raw BullMQ: no-op jobs through one worker (in this process) at the same concurrency: jobs per
 * second, and the CPU this process spent per job.
 */
async function bullmqNoop(
  prefix: string,
): Promise<{ jobsPerSecond: number; cpuMsPerJob: number; redisCpuMsPerJob: number }> {
  const connection = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
  const queue = new Queue('noop', { connection, prefix });
  let done = 0;
  let wanted = 0;
  let finished = () => {};
  /** Adds `count` jobs, in batches as wide as the concurrency, and waits until all are done. */
  const runJobs = async (count: number) => {
    done = 0;
    wanted = count;
    const allDone = new Promise<void>((resolve) => {
      finished = resolve;
    });
    for (let index = 0; index < count; index += CONCURRENCY)
      await queue.addBulk(
        Array.from({ length: CONCURRENCY }, (_, offset) => ({
          name: 'noop',
          data: { index: index + offset },
        })),
      );
    await allDone;
  };
  // BullMQ does not close a connection it was handed: each one given here is closed below, or
  // the process stays alive after its figures.
  const workerConnection = connection.duplicate();
  const worker = new Worker('noop', async () => {}, {
    connection: workerConnection,
    prefix,
    concurrency: CONCURRENCY,
  });
  worker.on('completed', () => {
    done += 1;
    if (done === wanted) finished();
  });
  await worker.waitUntilReady();
  // Warm up, as the runs are: BullMQ loads its scripts and the code runs hot before the clock starts
  // (without it the no-op rate swung 2,200–3,900 jobs/s between runs here).
  await runJobs(CONCURRENCY);
  const redisBefore = await redisCpuMs(connection);
  const started = performance.now();
  const cpuBefore = ownCpuMs();
  await runJobs(RUNS);
  const seconds = (performance.now() - started) / 1000;
  const cpuMsPerJob = (ownCpuMs() - cpuBefore) / RUNS;
  const redisCpuMsPerJob = ((await redisCpuMs(connection)) - redisBefore) / RUNS;
  await worker.close();
  await queue.obliterate({ force: true });
  await queue.close();
  workerConnection.disconnect();
  connection.disconnect();
  return { jobsPerSecond: RUNS / seconds, cpuMsPerJob, redisCpuMsPerJob };
}

/**
 * The floor a submission over HTTP stands on: a bare Fastify route that parses a JSON body and
 * answers a small one, called by the same `fetch` client at the same concurrency, in this process
 * (as the API and the bench's client are), with nothing behind it — no key, no Redis, no queue.
 * A run's submission is one such request and more; this says how much of its cost is the door.
 */
async function httpFloor(): Promise<{ requestsPerSecond: number; cpuMsPerRequest: number }> {
  const app = Fastify({ logger: false });
  let served = 0;
  app.post('/v1/floor', async (request) => {
    served += 1;
    return { id: `run_${served}`, status: 'queued', input: (request.body as { input?: unknown }).input };
  });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  const post = async () => {
    const response = await fetch(`${url}/v1/floor`, {
      method: 'POST',
      headers: { authorization: 'Bearer floor', 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'hello', script: { steps: [], answer: 'hi' } }),
    });
    return response.json();
  };
  try {
    await Promise.all(Array.from({ length: CONCURRENCY }, post));
    const started = performance.now();
    const cpuBefore = ownCpuMs();
    for (let index = 0; index < RUNS; index += CONCURRENCY)
      await Promise.all(Array.from({ length: CONCURRENCY }, post));
    return {
      requestsPerSecond: RUNS / ((performance.now() - started) / 1000),
      cpuMsPerRequest: (ownCpuMs() - cpuBefore) / RUNS,
    };
  } finally {
    await app.close();
  }
}

/** What a finished 10-step run keeps in Redis must stay at or under this. */
const REDIS_BYTES_PER_RUN_TARGET = 20 * 1024;

export default async function runsBench(): Promise<void> {
  // First, on a fleet of its own, before the throughput runs load this machine.
  const bytes = await measureRunBytes();
  report(figure(SUITE, 'redis_bytes_per_run', bytes.totalBytes));
  // Which key is heavy, for whoever must cut it (stderr: stdout carries only the figures).
  process.stderr.write(
    `redis_bytes_per_run: ${bytes.totalBytes} B for ${bytes.steps} steps (target ≤ ${REDIS_BYTES_PER_RUN_TARGET}): ${bytes.byKey.map(([key, size]) => `${key} ${size}`).join(', ')}\n`,
  );

  const prefix = uniquePrefix('bench-runs');
  const baseline = await bullmqNoop(`${prefix}-raw`);
  const floor = await httpFloor();

  // The per-key request limit would measure itself here, not the run pipeline.
  const fleet: FleetHandle = await startTestFleet(prefix, {
    RUN_WORKER_CONCURRENCY: String(CONCURRENCY),
    API_RATE_PER_SECOND: '1000000',
    API_RATE_BURST: '1000000',
  });
  // The run worker is a process of its own, as in production: the API and this client keep theirs.
  await fleet.roles.runWorker.close();
  const profiling = CPU_PROFILE_DIR
    ? ['--cpu-prof', '--cpu-prof-dir', CPU_PROFILE_DIR, '--cpu-prof-interval', String(PROFILE_INTERVAL_US)]
    : [];
  const worker = spawn(process.execPath, [...profiling, '--import', 'tsx', 'apps/run-worker/main.ts'], {
    cwd: fileURLToPath(new URL('../../', import.meta.url)),
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      REDIS_URL: testRedisUrl(),
      LEASEHOLD_KEY_PREFIX: `${prefix}:`,
      QUEUE_PREFIX: prefix,
      LEASEHOLD_DATA_PLANE_TOKEN: fleet.config.secrets.dataPlaneToken ?? '',
      RUN_WORKER_PORT: '0',
      RUN_WORKER_CONCURRENCY: String(CONCURRENCY),
      LOG_LEVEL: 'silent',
    },
    stdio: 'ignore',
  });
  const eventsConnection = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
  const events = new QueueEvents('runs', { connection: eventsConnection, prefix });
  await events.waitUntilReady();
  const api = fleet.urls.api.replace(/\/v1$/, '');
  const post = async (path: string, body: unknown) => {
    const response = await fetch(`${api}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${fleet.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return (await response.json()) as { id: string };
  };
  try {
    const agent = await post('/v1/agents', { model: 'scripted', instructions: 'answer' });
    const session = await post('/v1/sessions', { agent_id: agent.id });
    const submittedAt = new Map<string, number>();
    // A run may finish before its POST has answered, so completions are kept by job id first.
    const completedAt = new Map<string, number>();
    let finished!: () => void;
    const allDone = new Promise<void>((resolve) => {
      finished = resolve;
    });
    events.on('completed', ({ jobId }) => {
      completedAt.set(jobId, performance.now());
      if (completedAt.size === RUNS) finished();
    });

    // Warm up: the worker process has started and run one run before the clock starts.
    const warmUp = await post(`/v1/sessions/${session.id}/runs`, {
      input: 'warm',
      script: { steps: [], answer: 'hi' },
    });
    const warmJob = runJobId(warmUp.id, 1);
    while (!completedAt.has(warmJob)) await new Promise((resolve) => setTimeout(resolve, 50));
    completedAt.clear();

    const profiler = CPU_PROFILE_DIR ? new Session() : undefined;
    if (profiler) {
      profiler.connect();
      await profiler.post('Profiler.enable');
      await profiler.post('Profiler.setSamplingInterval', { interval: PROFILE_INTERVAL_US });
      await profiler.post('Profiler.start');
    }
    const cpuBefore = {
      redis: await redisCpuMs(eventsConnection),
      api: ownCpuMs(),
      worker: processCpuMs(worker.pid ?? 0),
    };
    const started = performance.now();
    for (let index = 0; index < RUNS; index += CONCURRENCY) {
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          const before = performance.now();
          const run = await post(`/v1/sessions/${session.id}/runs`, {
            input: 'hello',
            script: { steps: [], answer: 'hi' },
          });
          submittedAt.set(runJobId(run.id, 1), before);
        }),
      );
    }
    await allDone;
    const apiCpuMs = (ownCpuMs() - cpuBefore.api) / RUNS;
    const workerCpuMs = (processCpuMs(worker.pid ?? 0) - cpuBefore.worker) / RUNS;
    const redisCpuMsPerRun = ((await redisCpuMs(eventsConnection)) - cpuBefore.redis) / RUNS;
    if (profiler && CPU_PROFILE_DIR) {
      const { profile } = await profiler.post('Profiler.stop');
      mkdirSync(CPU_PROFILE_DIR, { recursive: true });
      writeFileSync(join(CPU_PROFILE_DIR, 'api-submit.cpuprofile'), JSON.stringify(profile));
      profiler.disconnect();
    }
    const latencies = [...submittedAt].map(([jobId, at]) => (completedAt.get(jobId) ?? Number.NaN) - at);
    const runsPerSecond = RUNS / ((performance.now() - started) / 1000);
    report(
      figure(SUITE, 'runs_per_s', runsPerSecond, {
        metric: 'bullmq_noop_jobs_per_s',
        value: baseline.jobsPerSecond,
      }),
    );
    // Where a run's cost lies, steady under a busy machine: this process (the API and the bench's
    // HTTP client) and the run worker's, each per run, beside raw BullMQ's per no-op job.
    const noopCpu = { metric: 'bullmq_noop_cpu_ms_per_job', value: baseline.cpuMsPerJob };
    report(figure(SUITE, 'api_and_client_cpu_ms_per_run', apiCpuMs, noopCpu));
    report(figure(SUITE, 'run_worker_cpu_ms_per_run', workerCpuMs, noopCpu));
    report(
      figure(SUITE, 'redis_cpu_ms_per_run', redisCpuMsPerRun, {
        metric: 'redis_cpu_ms_per_noop_job',
        value: baseline.redisCpuMsPerJob,
      }),
    );
    // All a run costs, every process together, beside all a no-op job costs. With every core busy
    // (the API, its client, the run worker and Redis share this machine's), runs per second cannot
    // pass cores × 1,000 / total CPU per run: the bound beside runs_per_s says whether the run
    // path's speed is its CPU, and what a runs_per_s target asks of the CPU per run.
    const totalCpuMs = apiCpuMs + workerCpuMs + redisCpuMsPerRun;
    const noopTotalCpuMs = baseline.cpuMsPerJob + baseline.redisCpuMsPerJob;
    report(
      figure(SUITE, 'total_cpu_ms_per_run', totalCpuMs, {
        metric: 'bullmq_noop_total_cpu_ms_per_job',
        value: noopTotalCpuMs,
      }),
    );
    report(
      figure(SUITE, 'cpu_bound_runs_per_s', (CORES * 1000) / totalCpuMs, {
        metric: 'bullmq_noop_jobs_per_s',
        value: baseline.jobsPerSecond,
      }),
    );
    // Beside the door alone: how much of a submission is HTTP (server and client), not Leasehold.
    report(
      figure(SUITE, 'http_floor_requests_per_s', floor.requestsPerSecond, {
        metric: 'bullmq_noop_jobs_per_s',
        value: baseline.jobsPerSecond,
      }),
    );
    report(
      figure(SUITE, 'http_floor_cpu_ms_per_request', floor.cpuMsPerRequest, {
        metric: 'api_and_client_cpu_ms_per_run',
        value: apiCpuMs,
      }),
    );
    // The most a run path could reach here if Leasehold's own work cost nothing: a bare HTTP request
    // (server and client) and a BullMQ no-op job (its process and Redis) per run, every core busy.
    report(
      figure(SUITE, 'floor_bound_runs_per_s', (CORES * 1000) / (floor.cpuMsPerRequest + noopTotalCpuMs), {
        metric: 'bullmq_noop_jobs_per_s',
        value: baseline.jobsPerSecond,
      }),
    );
    report(figure(SUITE, 'submit_to_done_p50_ms', percentile(latencies, 50)));
    report(figure(SUITE, 'submit_to_done_p99_ms', percentile(latencies, 99)));
  } finally {
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.kill('SIGTERM');
    await exited;
    await events.close();
    eventsConnection.disconnect();
    await fleet.close();
    const redis = new Redis(testRedisUrl());
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  }
}
