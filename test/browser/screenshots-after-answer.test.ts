import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ArtifactRef, type ArtifactStore, LocalArtifactStore } from '../../libs/artifacts/index.js';
import { type PageFactory, PlaywrightPageFactory } from '../../libs/lease/index.js';
import { RunKeys } from '../../libs/store/index.js';
import { readScreenshotNotes } from '../../libs/store/screenshot-states.js';
import {
  leaseOwnProfile,
  startTestBrowserWorker,
  TEST_TOKEN,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/** A local store whose writes wait until the test lets them through. */
class HeldStore implements ArtifactStore {
  #release: () => void = () => undefined;
  #gate = new Promise<void>((resolve) => {
    this.#release = resolve;
  });
  writesBegun = 0;

  constructor(private readonly inner: LocalArtifactStore) {}

  release(): void {
    this.#release();
  }
  async put(ref: ArtifactRef, bytes: Uint8Array, contentType: string): Promise<void> {
    this.writesBegun += 1;
    await this.#gate;
    await this.inner.put(ref, bytes, contentType);
  }
  get(ref: ArtifactRef) {
    return this.inner.get(ref);
  }
  deleteRun(tenant: string, runId: string) {
    return this.inner.deleteRun(tenant, runId);
  }
  listRuns() {
    return this.inner.listRuns();
  }
}

/** The lease's page factory, counting the screenshots its pages are asked for. */
function countingPages(counted: { screenshots: number }) {
  return (browser: ConstructorParameters<typeof PlaywrightPageFactory>[0]): PageFactory => {
    const pages = new PlaywrightPageFactory(browser);
    return {
      openContexts: () => pages.openContexts(),
      async open(input) {
        const session = await pages.open(input);
        const screenshot = session.screenshot?.bind(session);
        return Object.assign(Object.create(Object.getPrototypeOf(session)), session, {
          ...(screenshot
            ? {
                screenshot(options: Parameters<typeof screenshot>[0]) {
                  counted.screenshots += 1;
                  return screenshot(options);
                },
              }
            : {}),
        });
      },
    };
  };
}

/**
 * DESIGN §12: an act answers at the speed of the page. Its answer names the screenshot, noted
 * `pending` under the run; the picture is taken right after and the note says `stored`, or
 * `failed` with the reason once a capture failed twice.
 */
describe('screenshots taken after the answer', () => {
  const prefix = uniquePrefix('shots-after');
  const keys = new RunKeys(`${prefix}:`);
  const redis = new Redis(testRedisUrl());
  let site: Server;
  let origin: string;
  let dir: string;
  let held: HeldStore;
  let worker: TestBrowserWorker;
  let slow: TestBrowserWorker;
  const counted = { screenshots: 0 };

  const PAGE = `<!doctype html><title>Go</title><body><button>Go</button></body>`;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lh-shots-after-'));
    held = new HeldStore(await new LocalArtifactStore(dir).open());
    site = createServer((_request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end(PAGE);
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    [worker, slow] = await Promise.all([
      startTestBrowserWorker({ prefix, artifacts: held, workerId: 'bw-held' }),
      // A capture cannot answer in 1 ms: every one times out, the retry too.
      startTestBrowserWorker({
        prefix,
        workerId: 'bw-1ms',
        env: { LEASEHOLD_ARTIFACTS_DIR: dir, BROWSER_SCREENSHOT_TIMEOUT_MS: '1' },
        pages: countingPages(counted),
      }),
    ]);
  });

  afterAll(async () => {
    held?.release();
    await Promise.all([worker?.handle.close(), slow?.handle.close()]);
    await new Promise((resolve) => site.close(resolve));
    await rm(dir, { recursive: true, force: true });
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  /** A run record for the lease's run: notes are kept only for a run that exists. */
  async function runRecord(runId: string): Promise<void> {
    await redis.hset(keys.run(runId), 'tenant', 't1', 'status', 'running');
  }

  async function note(runId: string, name: string) {
    return (await readScreenshotNotes(redis, keys, runId)).get(name);
  }

  /** A lease of `profileId` for `runId` whose page went to the site and clicked Go: both answers. */
  async function navigatedAndClicked(profileId: string, runId: string) {
    const { path } = await leaseOwnProfile(worker, profileId, runId, origin);
    const navigated = await worker.call('POST', `${path}/navigate`, {
      body: { sequence: 1, url: `${origin}/` },
    });
    const go = navigated.body.observation.elements.find((e: { name: string }) => e.name === 'Go');
    const acted = await worker.call('POST', `${path}/act`, {
      body: {
        sequence: 2,
        args: { revision: navigated.body.observation.revision, element: go.ref, action: 'click' },
      },
    });
    return { path, navigated, acted, go };
  }

  it('answers an act before its screenshot exists, then stores it and notes it stored', async () => {
    const runId = 'run_after_answer';
    await runRecord(runId);
    const { path, navigated, acted, go } = await navigatedAndClicked('after', runId);
    expect(navigated.status).toBe(200);
    // Both answers came while no write could finish: neither waited for its screenshot.
    expect(acted.status).toBe(200);
    const name = acted.body.artifacts.screenshot as string;
    expect(name).toMatch(/^shot-[A-Za-z0-9_-]+\.jpg$/);
    expect(await held.get({ tenant: 't1', runId, name })).toBeUndefined();
    expect(await note(runId, name)).toEqual({ state: 'pending', reason: null });

    held.release();
    await expect
      .poll(() => note(runId, name), { timeout: 15_000 })
      .toEqual({ state: 'stored', reason: null });
    const stored = await held.get({ tenant: 't1', runId, name });
    expect(stored?.contentType).toBe('image/jpeg');
    expect(await note(runId, navigated.body.artifacts.screenshot)).toEqual({ state: 'stored', reason: null });
    // The note expires with the run: none while the run lives, the run's own time once it ended.
    expect(await redis.pttl(keys.screenshots(runId))).toBe(-1);
    await redis.pexpire(keys.run(runId), 60_000);
    const preview = await worker.call('POST', `${path}/observe`, { body: {} });
    const outlined = await worker.call('POST', `${path}/preview`, {
      body: { args: { revision: preview.body.observation.revision, element: go.ref } },
    });
    expect(outlined.status).toBe(200);
    const ttlMs = await redis.pttl(keys.screenshots(runId));
    expect(ttlMs).toBeGreaterThan(0);
    expect(ttlMs).toBeLessThanOrEqual(60_000);
  });

  it('takes the last act’s screenshot before the lease closed right after its answer', async () => {
    const runId = 'run_close_after_act';
    await runRecord(runId);
    held.release();
    const { path, acted } = await navigatedAndClicked('closing', runId);
    expect(acted.status).toBe(200);
    // A run's last act is followed at once by its release: the picture is the act's, not lost.
    const closed = await worker.call('POST', `${path}/close`, {
      body: { seal: true },
      idempotencyKey: `close-${runId}`,
    });
    expect(closed.status).toBe(200);
    const name = acted.body.artifacts.screenshot as string;
    await expect
      .poll(() => note(runId, name), { timeout: 15_000 })
      .toEqual({ state: 'stored', reason: null });
  });

  it('answers a preview under the name its caller chose, before the outlined picture exists', async () => {
    const runId = 'run_after_preview';
    await runRecord(runId);
    const { path } = await leaseOwnProfile(worker, 'after', runId, origin);
    const navigated = await worker.call('POST', `${path}/navigate`, {
      body: { sequence: 1, url: `${origin}/` },
    });
    const go = navigated.body.observation.elements.find((e: { name: string }) => e.name === 'Go');
    const chosen = 'preview-chosen_by_the_run_side.jpg';
    const answered = await worker.call('POST', `${path}/preview`, {
      body: { args: { revision: navigated.body.observation.revision, element: go.ref }, screenshot: chosen },
    });
    expect(answered.status).toBe(200);
    expect(answered.body.artifacts).toEqual({ screenshot: chosen });
    await expect
      .poll(() => note(runId, chosen), { timeout: 15_000 })
      .toEqual({ state: 'stored', reason: null });
    // A name the run already used is never taken twice.
    const again = await worker.call('POST', `${path}/preview`, {
      body: { args: { revision: navigated.body.observation.revision, element: go.ref }, screenshot: chosen },
    });
    expect(again.status).toBe(200);
    expect(again.body.artifacts).toEqual({});
  });

  it('notes why a screenshot is missing once its capture failed twice, and counts it', async () => {
    const runId = 'run_after_timeout';
    await runRecord(runId);
    const { path } = await leaseOwnProfile(slow, 'after', runId, origin);
    const before = counted.screenshots;
    const navigated = await slow.call('POST', `${path}/navigate`, {
      body: { sequence: 1, url: `${origin}/` },
    });
    expect(navigated.status).toBe(200);
    const name = navigated.body.artifacts.screenshot as string;
    await expect
      .poll(() => note(runId, name), { timeout: 15_000 })
      .toEqual({ state: 'failed', reason: 'capture_timeout' });
    expect(counted.screenshots - before).toBe(2);
    expect(await slow.handle.artifacts.get({ tenant: 't1', runId, name })).toBeUndefined();
    const metrics = await fetch(`${slow.url}/metrics`, {
      headers: { authorization: `Bearer ${TEST_TOKEN}` },
    });
    expect(await metrics.text()).toMatch(/leasehold_screenshot_failures_total\{stage="capture"\} [1-9]/);
  });
});
