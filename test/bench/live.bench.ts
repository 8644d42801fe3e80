import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import type { Browser } from 'playwright-core';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import type { EgressProxy } from '../../libs/egress/index.js';
import type { PageFactory, PageSession } from '../../libs/lease/index.js';
import { PlaywrightPageFactory } from '../../libs/lease/index.js';
import { DataPlaneClient } from '../../libs/provider/index.js';
import { RedisLeaseStore } from '../../libs/store/index.js';
import { leaseOwnProfile, startTestBrowserWorker, TEST_TOKEN } from '../fixtures/browser-worker.js';
import { EventStreamReader } from '../fixtures/event-stream.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';
import { figure, percentile, report } from './report.js';

/**
 * `npm run bench -- live [--quick]`: the live view's latencies through the whole fleet, and what
 * streaming costs the browser worker when nobody watches.
 * - `frame_latency_p50_ms`: a page's change (its own clock, as its key handler ran) → the frame
 *   showing it at an SSE viewer of the API (`GET /v1/runs/:id/live`).
 * - `input_latency_p50_ms`: a key sent to the API (`POST /v1/runs/:id/input`) → the page's key
 *   handler running.
 * - `worker_cpu_ms_per_s`: the browser worker's CPU (this process and its Chromium) with 10 leases
 *   on animated pages and no viewer, beside the same with the streaming code off (pages that offer
 *   no live view); SAMPLES samples of SAMPLE_MS each, alternating. `--quick` shortens them.
 * - `worker_cpu_ms_per_s_watched`: the same 10 animated pages, each watched by one stream of its
 *   lease's live view, beside the same pages unwatched: what a watched page that never stops
 *   changing costs (every frame acknowledged, 10 a second handed on).
 */
const SUITE = 'live';
const QUICK = process.argv.includes('--quick');
const LATENCY_SAMPLES = QUICK ? 15 : 40;
const CPU_SAMPLES = 3;
const CPU_SAMPLE_MS = QUICK ? 15_000 : 60_000;
const LEASES = 10;

const KEY_PAGE = `<!doctype html><title>Keys</title><body style="margin:0;background:#fff">
<h1 id="n">0</h1>
<script>
let n = 0;
document.addEventListener('keydown', () => {
  const at = Date.now();
  n += 1;
  document.body.style.background = n % 2 ? '#c33' : '#3c3';
  document.getElementById('n').textContent = String(n);
  fetch('/changed?n=' + n + '&at=' + at);
});
</script></body>`;
const ANIMATED_PAGE = `<!doctype html><title>Busy</title><style>
@keyframes spin { to { transform: rotate(360deg); } }
div { width: 120px; height: 120px; background: #36c; animation: spin 1s linear infinite; }
</style><div></div>`;

/** The site: the key page, an animated page, and the page's reports of each change (by number). */
async function startSite(): Promise<{ server: Server; origin: string; changes: Map<number, number> }> {
  const changes = new Map<number, number>();
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://site');
    if (url.pathname === '/changed') {
      changes.set(Number(url.searchParams.get('n')), Number(url.searchParams.get('at')));
      return void response.end('ok');
    }
    response.setHeader('content-type', 'text/html');
    response.end(url.pathname === '/busy' ? ANIMATED_PAGE : KEY_PAGE);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, changes };
}

async function waitFor<T>(read: () => T | undefined, timeoutMs: number): Promise<T> {
  const untilMs = Date.now() + timeoutMs;
  for (;;) {
    const value = read();
    if (value !== undefined) return value;
    if (Date.now() > untilMs) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

async function latencies(fleet: FleetHandle, origin: string, changes: Map<number, number>): Promise<void> {
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  await call('POST', '/v1/profiles', { id: 'live-bench', allowed_origins: [origin] });
  const agent = await call('POST', '/v1/agents', {
    model: 'scripted',
    instructions: 'Wait.',
    tools: ['browser.navigate', 'browser.observe', 'browser.act'],
  });
  const session = await call('POST', '/v1/sessions', {
    agent_id: agent.body.id,
    browser_profile_id: 'live-bench',
  });
  const run = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
    input: 'Wait',
    script: {
      steps: [
        { tool: 'browser.navigate', url: `${origin}/keys` },
        { tool: 'browser.act', target: { role: 'heading', name: '0' }, action: 'click' },
      ],
      answer: 'Done.',
    },
  });
  const runId = run.body.id as string;
  if ((await waitForStatus(runId, ['parked', 'succeeded', 'failed'])).status !== 'parked')
    throw new Error('the bench run did not park');
  const redis = new Redis(testRedisUrl());
  const profile = { tenant: 'dev', id: 'live-bench' };
  const leaseId = (await new RedisLeaseStore(redis, fleet.config.redis.keyPrefix).liveLeaseId(
    profile,
  )) as string;
  redis.disconnect();
  const client = new DataPlaneClient({
    baseUrl: fleet.urls.browserWorker,
    token: fleet.config.secrets.dataPlaneToken as string,
  });
  await client.startPersonControl({ profile, leaseId }, { holder: 'principal:dev', seconds: 600 });

  const viewer = await EventStreamReader.open(`${fleet.urls.api}/runs/${runId}/live`, {
    authorization: `Bearer ${fleet.apiKey}`,
  });
  await viewer.next((event) => event.event === 'frame');
  const frameMs: number[] = [];
  const inputMs: number[] = [];
  for (let n = 1; n <= LATENCY_SAMPLES; n += 1) {
    // Quiet first: the next frame is the change's.
    await new Promise((resolve) => setTimeout(resolve, 300));
    viewer.seen.splice(0);
    const framed = viewer.next((event) => event.event === 'frame', 10_000).then(() => Date.now());
    const sentAt = Date.now();
    const answer = await call('POST', `/v1/runs/${runId}/input`, {
      events: [
        { type: 'key', action: 'down', key: 'k' },
        { type: 'key', action: 'up', key: 'k' },
      ],
    });
    if (answer.status !== 200) throw new Error(`input answered ${answer.status}`);
    const changedAt = await waitFor(() => changes.get(n), 10_000);
    inputMs.push(changedAt - sentAt);
    frameMs.push((await framed) - changedAt);
  }
  viewer.close();
  await client.endPersonControl({ profile, leaseId }, { holder: 'principal:dev' });
  report(figure(SUITE, 'frame_latency_p50_ms', percentile(frameMs, 50)));
  report(figure(SUITE, 'frame_latency_p95_ms', percentile(frameMs, 95)));
  report(figure(SUITE, 'input_latency_p50_ms', percentile(inputMs, 50)));
  report(figure(SUITE, 'input_latency_p95_ms', percentile(inputMs, 95)));
}

/** CPU ms (user + system) of this process and every process below it (Chromium's). */
function treeCpuMs(): number {
  const parents = new Map<number, number>();
  const cpu = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const fields = readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
      parents.set(Number(entry), Number(fields[1]));
      cpu.set(Number(entry), (Number(fields[11]) + Number(fields[12])) * 10);
    } catch {
      // The process ended meanwhile.
    }
  }
  let total = 0;
  for (const [pid, ms] of cpu) {
    let at: number | undefined = pid;
    while (at !== undefined && at > 1 && at !== process.pid) at = parents.get(at);
    if (at === process.pid) total += ms;
  }
  return total;
}

/**
 * A page factory whose pages offer no live view: the streaming code off. Its pages are fenced
 * through the worker's egress proxy like the worker's own, so the two differ in streaming alone.
 */
function withoutLiveView(browser: () => Browser, egress: EgressProxy): PageFactory {
  const inner = new PlaywrightPageFactory(browser, { egress });
  return {
    openContexts: () => inner.openContexts(),
    async open(input) {
      const session = await inner.open(input);
      const plain: PageSession = {
        navigate: (...args) => session.navigate(...args),
        observe: (...args) => session.observe(...args),
        act: (...args) => session.act(...args),
        storageState: () => session.storageState(),
        dispose: () => session.dispose(),
      };
      return plain;
    },
  };
}

/** `off`: pages with no live view; `unwatched`: the live view, nobody watching; `watched`: one stream each. */
async function workerCpu(origin: string, mode: 'off' | 'unwatched' | 'watched'): Promise<number> {
  const prefix = uniquePrefix(`live-cpu-${mode}`);
  const worker = await startTestBrowserWorker({
    prefix,
    ...(mode === 'off' ? { pages: withoutLiveView } : {}),
  });
  const viewers: EventStreamReader[] = [];
  try {
    for (let index = 0; index < LEASES; index += 1) {
      const lease = await leaseOwnProfile(worker, 'cpu', `run_cpu${index}`, origin);
      const navigated = await worker.call('POST', `${lease.path}/navigate`, {
        body: { sequence: 1, url: `${origin}/busy` },
      });
      if (navigated.status !== 200) throw new Error(`navigate answered ${navigated.status}`);
      if (mode === 'watched')
        viewers.push(
          await EventStreamReader.open(`${worker.url}${lease.path}/live`, {
            authorization: `Bearer ${TEST_TOKEN}`,
          }),
        );
    }
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const before = treeCpuMs();
    const startedMs = Date.now();
    await new Promise((resolve) => setTimeout(resolve, CPU_SAMPLE_MS));
    return (treeCpuMs() - before) / ((Date.now() - startedMs) / 1_000);
  } finally {
    for (const viewer of viewers) viewer.close();
    await worker.handle.close();
    const redis = new Redis(testRedisUrl());
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  }
}

export default async function liveBench(): Promise<void> {
  const site = await startSite();
  // `--cpu-only` measures the CPU figure alone.
  if (!process.argv.includes('--cpu-only')) {
    const fleet = await startTestFleet(uniquePrefix('live-bench'));
    try {
      await latencies(fleet, site.origin, site.changes);
    } finally {
      await fleet.close();
    }
  }
  try {
    const on: number[] = [];
    const off: number[] = [];
    const watched: number[] = [];
    for (let sample = 0; sample < CPU_SAMPLES; sample += 1) {
      on.push(await workerCpu(site.origin, 'unwatched'));
      off.push(await workerCpu(site.origin, 'off'));
      watched.push(await workerCpu(site.origin, 'watched'));
    }
    const median = (values: number[]) => percentile(values, 50);
    process.stderr.write(
      `cpu ms/s with live view, no viewer: ${on.map(Math.round).join(', ')}; off: ${off.map(Math.round).join(', ')}\n`,
    );
    process.stderr.write(`cpu ms/s with every page watched: ${watched.map(Math.round).join(', ')}\n`);
    report(
      figure(SUITE, 'worker_cpu_ms_per_s', median(on), {
        metric: 'worker_cpu_ms_per_s_streaming_off',
        value: median(off),
      }),
    );
    report(
      figure(SUITE, 'worker_cpu_ms_per_s_watched', median(watched), {
        metric: 'worker_cpu_ms_per_s',
        value: median(on),
      }),
    );
  } finally {
    await new Promise((resolve) => site.server.close(resolve));
  }
}
