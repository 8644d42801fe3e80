import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  leaseOwnProfile,
  startTestBrowserWorker,
  TEST_TOKEN,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/**
 * On a real browser worker (real Chromium, real Redis): its data plane says which browser
 * tools contract it speaks and refuses a caller that speaks another, and every settle of a navigate
 * or act is counted by tool and result in `leasehold_settle_total` and `leasehold_settle_seconds`.
 */
describe('the browser tools contract and settle outcomes on the data plane', () => {
  const prefix = uniquePrefix('tools-contract');
  let worker: TestBrowserWorker;
  let site: Server;
  let origin: string;

  const QUIET = `<!doctype html><title>Quiet</title><h1>Quiet</h1>
<button onclick="document.body.insertAdjacentHTML('beforeend', '<p>Done</p>')">Go</button>`;
  // A page that changes every 50 ms never turns quiet: its settle ends at the 2 s bound (ADR-0159).
  const RESTLESS = `<!doctype html><title>Restless</title><p id="n">0</p>
<script>setInterval(() => { const n = document.getElementById('n'); n.textContent = String(Number(n.textContent) + 1); }, 50);</script>`;

  beforeAll(async () => {
    worker = await startTestBrowserWorker({ prefix });
    site = createServer((request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end(request.url === '/restless' ? RESTLESS : QUIET);
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await worker?.handle.close();
    await new Promise((resolve) => site.close(resolve));
    const redis = new Redis(testRedisUrl());
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  /** The value of one sample line of the worker's `/metrics` (0 when it has none yet). */
  async function sample(line: string): Promise<number> {
    const text = await (await fetch(`${worker.url}/metrics`)).text();
    const row = text.split('\n').find((candidate) => candidate.startsWith(`${line} `));
    return row ? Number(row.slice(line.length + 1)) : 0;
  }

  function navigateWithContract(path: string, version: string, sequence: number) {
    return fetch(`${worker.url}${path}/navigate`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TEST_TOKEN}`,
        'content-type': 'application/json',
        'leasehold-browser-tools': version,
      },
      body: JSON.stringify({ sequence, url: `${origin}/` }),
    });
  }

  it('answers GET /v1/worker with the contract it speaks and the versions it still takes', async () => {
    const answer = await worker.call('GET', '/v1/worker');
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({
      id: 'bw-test',
      browser_tools_contract: '1.6.0',
      browser_tools_compatible: ['1.2.0', '1.3.0', '1.4.0', '1.5.0', '1.6.0'],
    });
  });

  it('serves a caller that says it speaks 1.2.0 and refuses one that speaks an unknown version', async () => {
    const { path } = await leaseOwnProfile(worker, 'contract', 'run_contract', origin);
    const refused = await navigateWithContract(path, '2.0.0', 1);
    expect(refused.status).toBe(422);
    const body = (await refused.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('invalid_arguments');
    expect(body.error.message).toContain('1.4.0');
    expect(body.error.message).toContain('2.0.0');

    // Refused before anything was done: the lease's sequence 1 is still the next one.
    const served = await navigateWithContract(path, '1.2.0', 1);
    expect(served.status).toBe(200);
    const answered = (await served.json()) as { observation: { settle: { result: string } } };
    expect(answered.observation.settle.result).toBe('dom_quiet');
  });

  it('counts each navigate’s and act’s settle by tool and result, with its time', async () => {
    const navigateQuiet = 'leasehold_settle_total{tool="navigate",result="dom_quiet"}';
    const actQuiet = 'leasehold_settle_total{tool="act",result="dom_quiet"}';
    const navigateSeconds = 'leasehold_settle_seconds_count{tool="navigate"}';
    const before = {
      navigate: await sample(navigateQuiet),
      act: await sample(actQuiet),
      seconds: await sample(navigateSeconds),
    };
    const { path } = await leaseOwnProfile(worker, 'settles', 'run_settles', origin);
    const navigated = await worker.call('POST', `${path}/navigate`, {
      body: { sequence: 1, url: `${origin}/` },
    });
    expect(navigated.body.observation.settle.result).toBe('dom_quiet');
    expect(await sample(navigateQuiet)).toBe(before.navigate + 1);
    expect(await sample(navigateSeconds)).toBe(before.seconds + 1);

    const button = navigated.body.observation.elements.find((e: { name: string }) => e.name === 'Go');
    const acted = await worker.call('POST', `${path}/act`, {
      body: {
        sequence: 2,
        args: { revision: navigated.body.observation.revision, element: button.ref, action: 'click' },
      },
    });
    expect(acted.status).toBe(200);
    expect(acted.body.observation.settle.result).toBe('dom_quiet');
    expect(await sample(actQuiet)).toBe(before.act + 1);
    expect(await sample('leasehold_settle_seconds_count{tool="act"}')).toBeGreaterThanOrEqual(1);
    // The histogram's buckets are a settle's: around the 0.3 s quiet window and the 2 s bound.
    const text = await (await fetch(`${worker.url}/metrics`)).text();
    for (const le of ['0.3', '0.75', '2', '3'])
      expect(text).toContain(`leasehold_settle_seconds_bucket{le="${le}",tool="navigate"}`);
  });

  it('counts a page that never turns quiet as bound_expired', async () => {
    const expired = 'leasehold_settle_total{tool="navigate",result="bound_expired"}';
    const before = await sample(expired);
    const { path } = await leaseOwnProfile(worker, 'restless', 'run_restless', origin);
    const navigated = await worker.call('POST', `${path}/navigate`, {
      body: { sequence: 1, url: `${origin}/restless` },
    });
    expect(navigated.body.observation.settle.result).toBe('bound_expired');
    expect(await sample(expired)).toBe(before + 1);
  });
});
