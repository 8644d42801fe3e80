import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import type { TranscriptEntry } from '../../libs/runtime/index.js';
import { RunTranscripts } from '../../libs/store/run-transcript.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/**
 * A page that fails once: its first load lacks the Continue button, later loads have it. A click
 * posts to `/continue`, which the server counts (the effect).
 */
function startFlakySite(): Promise<{
  server: Server;
  origin: string;
  loads: () => number;
  effects: () => number;
}> {
  let loads = 0;
  let effects = 0;
  const server = createServer((request, response) => {
    if (request.url === '/continue' && request.method === 'POST') {
      effects += 1;
      response.end('ok');
      return;
    }
    if (request.url !== '/flaky') {
      response.statusCode = 404;
      response.end();
      return;
    }
    loads += 1;
    response.setHeader('content-type', 'text/html');
    response.end(
      loads === 1
        ? '<!doctype html><title>Flaky</title><h1>Not ready yet</h1>'
        : `<!doctype html><title>Flaky</title><h1>Ready</h1>
           <button onclick="fetch('/continue', {method: 'POST'}).then(() => document.body.insertAdjacentHTML('beforeend', '<h2>Done</h2>'))">Continue</button>`,
    );
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        server,
        origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        loads: () => loads,
        effects: () => effects,
      }),
    ),
  );
}

describe('a retried run starts clean', () => {
  const prefix = uniquePrefix('retry-clean');
  let fleet: FleetHandle;
  let site: Awaited<ReturnType<typeof startFlakySite>>;
  let redis: Redis;
  let transcripts: RunTranscripts;
  /** Set by a test: the next execution end waits this long before it closes its page. */
  let slowLeaseCloseMs = 0;
  const { call, waitForStatus, boundSession } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    site = await startFlakySite();
    fleet = await startTestFleet(
      prefix,
      {},
      {
        faults: async (point) => {
          if (point !== 'lease.close' || slowLeaseCloseMs === 0) return;
          const delayMs = slowLeaseCloseMs;
          slowLeaseCloseMs = 0;
          await new Promise((resolve) => setTimeout(resolve, delayMs));
        },
      },
    );
    redis = new Redis(testRedisUrl());
    transcripts = new RunTranscripts(redis, `${prefix}:`);
  });

  afterAll(async () => {
    await fleet?.close();
    await new Promise((resolve) => site?.server.close(resolve));
    if (redis) {
      await deletePrefixedKeys(redis, prefix);
      redis.disconnect();
    }
  });

  it('runs the script again on a fresh transcript, touches the page, and keeps attempt 1 readable', async () => {
    const sessionId = await boundSession({
      profileId: 'flaky',
      origin: site.origin,
      instructions: 'Continue.',
    });
    const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
      input: 'Continue on the flaky page',
      script: {
        steps: [
          { tool: 'browser.navigate', url: `${site.origin}/flaky` },
          {
            tool: 'browser.act',
            target: { role: 'button', name: 'Continue' },
            action: 'click',
            postcondition: { role: 'heading', name: 'Done', wait_ms: 2000 },
          },
        ],
        answer: 'Continued.',
      },
    });
    const runId: string = submitted.body.id;
    const first = await waitForStatus(runId, ['failed', 'succeeded']);
    expect(first).toMatchObject({
      status: 'failed',
      attempt: 1,
      error: { code: 'element_not_found', step: 2 },
    });
    expect(site.loads()).toBe(1);

    const retried = await call('POST', `/v1/runs/${runId}/retry`, {});
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ status: 'queued', attempt: 2, error: null });

    // Attempt 2 starts its script again: it loads the page (now ready) and asks to click.
    const parked = await waitForStatus(runId, ['parked', 'failed', 'succeeded']);
    expect({ status: parked.status, attempt: parked.attempt, error: parked.error }).toEqual({
      status: 'parked',
      attempt: 2,
      error: null,
    });
    expect(site.loads()).toBe(2);
    const approved = await call('POST', `/v1/approvals/${parked.pending_approvals[0].id}/approve`, {});
    expect(approved.status).toBe(200);
    const done = await waitForStatus(runId, ['failed', 'succeeded']);
    expect(done).toMatchObject({
      status: 'succeeded',
      attempt: 2,
      result: { answer: 'Continued.' },
      error: null,
    });
    expect(site.effects()).toBe(1);

    // The new transcript holds the input and a note of what attempt 1 dispatched, then its own turns.
    const now = await transcripts.load<TranscriptEntry>(runId);
    expect(now[0]).toEqual({ kind: 'input', text: 'Continue on the flaky page' });
    expect(now[1]).toMatchObject({
      kind: 'input',
      earlierEffects: [
        { attempt: 1, tool: 'browser.navigate', target: `${site.origin}/flaky`, outcome: 'completed' },
      ],
    });
    expect(now[1]?.kind === 'input' && now[1].text).toContain(`${site.origin}/flaky`);
    expect(now.filter((entry) => entry.kind === 'model')).toHaveLength(3);

    // Attempt 1's transcript and ledger stay readable under its number.
    const old = await transcripts.loadAttempt<TranscriptEntry>(runId, 1);
    expect(old[0]).toEqual({ kind: 'input', text: 'Continue on the flaky page' });
    expect(old.at(-1)).toMatchObject({ kind: 'model', failedStep: { code: 'element_not_found' } });
    expect((await fleet.store.listInvocations(runId, 1)).map((entry) => entry.tool)).toEqual([
      'browser.navigate',
    ]);
    expect((await fleet.store.listInvocations(runId, 2)).map((entry) => entry.tool)).toEqual([
      'browser.navigate',
      'browser.act',
    ]);
  });

  it('starts attempt 2 clean while attempt 1 is still closing its page', async () => {
    // Under load the retry can come between attempt 1's end and its lease's close: attempt 2 then
    // meets the page attempt 1 still holds. CI saw attempt 2 fail there.
    const slowSite = await startFlakySite();
    try {
      const sessionId = await boundSession({
        profileId: 'flaky-slow-close',
        origin: slowSite.origin,
        instructions: 'Continue.',
      });
      slowLeaseCloseMs = 3_000;
      const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
        input: 'Continue on the flaky page',
        script: {
          steps: [
            { tool: 'browser.navigate', url: `${slowSite.origin}/flaky` },
            { tool: 'browser.act', target: { role: 'button', name: 'Continue' }, action: 'click' },
          ],
          answer: 'Continued.',
        },
      });
      const runId: string = submitted.body.id;
      const first = await waitForStatus(runId, ['failed', 'succeeded']);
      expect(first).toMatchObject({ status: 'failed', attempt: 1 });
      const retried = await call('POST', `/v1/runs/${runId}/retry`, {});
      expect(retried.status).toBe(200);
      const parked = await waitForStatus(runId, ['parked', 'failed', 'succeeded']);
      expect({ status: parked.status, attempt: parked.attempt, error: parked.error }).toEqual({
        status: 'parked',
        attempt: 2,
        error: null,
      });
      expect(slowSite.loads()).toBe(2);
    } finally {
      slowLeaseCloseMs = 0;
      await new Promise((resolve) => slowSite.server.close(resolve));
    }
  });
});
