import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { RunKeys } from '../../libs/store/index.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/** Buttons on the bench's page: the run clicks each once (a repeated identical call would trip the breaker). */
const BUTTONS = ['One', 'Two', 'Three', 'Four', 'Five', 'Six', 'Seven', 'Eight'];

/** What one finished run leaves in Redis: every key it owns (`RunKeys.runOwned`), in bytes. */
export interface RunBytes {
  runId: string;
  steps: number;
  totalBytes: number;
  /** Bytes by the key's own part (`run`, `events`, `steps`…), heaviest first. */
  byKey: Array<[string, number]>;
}

/**
 * `redis_bytes_per_run`: one scripted run through the whole fleet in this process (real
 * browser worker, real Chromium) on a small page the bench serves: a navigate, then a click on each
 * button (the first one approved with a grant covering the rest), then the answer. When it has
 * succeeded, `MEMORY USAGE … SAMPLES 0` (exact, every element counted) is summed over every key the
 * run owns. Screenshots are in the artifact store, not in Redis: only their names count.
 */
export async function measureRunBytes(): Promise<RunBytes> {
  const site = createServer((request, response) => {
    if (request.method === 'POST') return void response.end('ok');
    const buttons = BUTTONS.map(
      (name) =>
        `<button onclick="fetch('click', {method: 'POST'}).then(() => document.body.insertAdjacentHTML('beforeend', '<h2>Clicked ${name}</h2>'))">${name}</button>`,
    ).join('');
    response.setHeader('content-type', 'text/html');
    response.end(
      `<!doctype html><title>Bench page</title><h1>Bench page</h1><p>Eight buttons.</p>${buttons}`,
    );
  });
  await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  const prefix = uniquePrefix('bench-run-bytes');
  const redis = new Redis(testRedisUrl());
  const fleet = await startTestFleet(prefix, { API_RATE_PER_SECOND: '1000000', API_RATE_BURST: '1000000' });
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  try {
    await call('POST', '/v1/profiles', { id: 'bench', allowed_origins: [origin] });
    const agent = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: 'Click every button.',
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
    });
    const session = await call('POST', '/v1/sessions', {
      agent_id: agent.body.id,
      browser_profile_id: 'bench',
    });
    const clicks = BUTTONS.map((name) => ({
      tool: 'browser.act',
      target: { role: 'button', name },
      action: 'click',
      postcondition: { role: 'heading', name: `Clicked ${name}`, wait_ms: 2_000 },
    }));
    const submitted = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input: 'Click every button on the bench page.',
      script: { steps: [{ tool: 'browser.navigate', url: `${origin}/` }, ...clicks], answer: 'All clicked.' },
    });
    if (submitted.status !== 201) throw new Error(`run not submitted: ${JSON.stringify(submitted.body)}`);
    const runId: string = submitted.body.id;
    const parked = await waitForStatus(runId, ['parked', 'succeeded', 'failed'], 60_000);
    if (parked.status === 'parked') {
      await call('POST', `/v1/approvals/${parked.pending_approvals[0].id}/approve`, {
        grant: { duration_ms: 600_000, max_actions: BUTTONS.length },
      });
    }
    const done = await waitForStatus(runId, ['succeeded', 'failed', 'cancelled'], 120_000);
    if (done.status !== 'succeeded')
      throw new Error(`bench run ended ${done.status}: ${JSON.stringify(done.error)}`);

    const keys = new RunKeys(fleet.config.redis.keyPrefix);
    const owned = keys.runOwned(runId, done.attempt ?? 1);
    const sizes = await Promise.all(
      owned.map(async (key) => Number((await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0)),
    );
    const byKey = owned
      .map((key, index): [string, number] => [key.slice(key.indexOf('}:') + 2), sizes[index] ?? 0])
      .filter(([, bytes]) => bytes > 0)
      .sort((a, b) => b[1] - a[1]);
    return { runId, steps: done.usage.steps, totalBytes: sizes.reduce((a, b) => a + b, 0), byKey };
  } finally {
    await fleet.close();
    await new Promise((resolve) => site.close(resolve));
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  }
}
