import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  leaseOwnProfile,
  startTestBrowserWorker,
  TEST_TOKEN,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { launchTestBrowser } from '../fixtures/chromium.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/**
 * The browser worker captures the settled page after navigate and act, and outlines an
 * act's target for its approval card, into the artifact store under the lease's tenant and run.
 */
describe('screenshots of a lease’s page', () => {
  const prefix = uniquePrefix('shots');
  let worker: TestBrowserWorker;
  let site: Server;
  let origin: string;
  let dir: string;
  let decoder: Browser;
  let canvas: Page;

  // The click turns the body blue 150 ms later: a capture taken before the page settled shows white.
  const PAGE = `<!doctype html><title>Colours</title>
<body style="margin:0;background:rgb(255,255,255)">
<button id="go" style="position:absolute;left:100px;top:200px;width:200px;height:60px">Paint</button>
<script>document.getElementById('go').addEventListener('click', () =>
  setTimeout(() => { document.body.style.background = 'rgb(0,96,255)'; }, 150));</script></body>`;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lh-shots-'));
    worker = await startTestBrowserWorker({ prefix, env: { LEASEHOLD_ARTIFACTS_DIR: dir } });
    site = createServer((_request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end(PAGE);
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    decoder = await launchTestBrowser();
    canvas = await decoder.newPage();
  });

  afterAll(async () => {
    await worker?.handle.close();
    await decoder?.close();
    await new Promise((resolve) => site.close(resolve));
    await rm(dir, { recursive: true, force: true });
    const redis = new Redis(testRedisUrl());
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  async function lease(runId: string): Promise<string> {
    return (await leaseOwnProfile(worker, 'shots', runId, origin)).path;
  }

  /** Decodes a JPEG in Chromium: its size and the RGB of the given pixels. */
  async function decode(bytes: Uint8Array, points: Array<[number, number]>) {
    const src = `data:image/jpeg;base64,${Buffer.from(bytes).toString('base64')}`;
    return canvas.evaluate(
      async ({ src, points }) => {
        const image = new Image();
        image.src = src;
        await image.decode();
        const board = document.createElement('canvas');
        board.width = image.naturalWidth;
        board.height = image.naturalHeight;
        const context = board.getContext('2d') as CanvasRenderingContext2D;
        context.drawImage(image, 0, 0);
        return {
          width: image.naturalWidth,
          height: image.naturalHeight,
          pixels: points.map(([x, y]) => Array.from(context.getImageData(x, y, 1, 1).data).slice(0, 3)),
        };
      },
      { src, points },
    );
  }

  /** The artifact once stored: DESIGN §12, screenshots are taken after their call answered. */
  async function stored(runId: string, name: string) {
    const read = () => worker.handle.artifacts.get({ tenant: 't1', runId, name });
    await expect.poll(async () => (await read())?.contentType, { timeout: 15_000 }).toBe('image/jpeg');
    return (await read())?.bytes ?? new Uint8Array();
  }

  it('answers an act with a screenshot of the settled viewport, stored under the lease’s run', async () => {
    const path = await lease('run_shot_act');
    const navigated = await worker.call('POST', `${path}/navigate`, {
      body: { sequence: 1, url: `${origin}/` },
    });
    expect(navigated.status).toBe(200);
    expect(navigated.body.artifacts.screenshot).toMatch(/^shot-[A-Za-z0-9_-]+\.jpg$/);
    const before = await decode(await stored('run_shot_act', navigated.body.artifacts.screenshot), [
      [20, 20],
    ]);
    expect(Math.min(...(before.pixels[0] ?? []))).toBeGreaterThan(235);

    const button = navigated.body.observation.elements.find((e: { name: string }) => e.name === 'Paint');
    const acted = await worker.call('POST', `${path}/act`, {
      body: {
        sequence: 2,
        args: { revision: navigated.body.observation.revision, element: button.ref, action: 'click' },
      },
    });
    expect(acted.status).toBe(200);
    const name = acted.body.artifacts.screenshot as string;
    expect(name).toMatch(/^shot-[A-Za-z0-9_-]+\.jpg$/);
    expect(name).not.toBe(navigated.body.artifacts.screenshot);
    const bytes = await stored('run_shot_act', name);
    // JPEG's start-of-image marker, at the viewport's size (Playwright's default 1280×720).
    expect([bytes[0], bytes[1]]).toEqual([0xff, 0xd8]);
    const shot = await decode(bytes, [[20, 20]]);
    expect({ width: shot.width, height: shot.height }).toEqual({ width: 1280, height: 720 });
    const [r, g, b] = shot.pixels[0] ?? [];
    expect(r).toBeLessThan(40);
    expect(g).toBeGreaterThan(70);
    expect(g).toBeLessThan(125);
    expect(b).toBeGreaterThan(225);
    // The observation answers no artifacts: observe is not captured.
    const observed = await worker.call('POST', `${path}/observe`, { body: {} });
    expect(observed.body.artifacts).toBeUndefined();
  });

  it('outlines an observed element for a preview and leaves the page as it was', async () => {
    const path = await lease('run_shot_preview');
    const navigated = await worker.call('POST', `${path}/navigate`, {
      body: { sequence: 1, url: `${origin}/` },
    });
    const { revision, elements } = navigated.body.observation;
    const button = elements.find((e: { name: string }) => e.name === 'Paint');
    const previewed = await worker.call('POST', `${path}/preview`, {
      body: { args: { revision, element: button.ref } },
    });
    expect(previewed.status).toBe(200);
    expect(previewed.body.lease.sequence).toBe(1);
    const name = previewed.body.artifacts.screenshot as string;
    expect(name).toMatch(/^preview-[A-Za-z0-9_-]+\.jpg$/);
    // The button spans x 100–300, y 200–260; the outline runs a few pixels outside it.
    const shot = await decode(await stored('run_shot_preview', name), [
      [97, 230],
      [200, 197],
      [303, 230],
      [50, 50],
    ]);
    for (const [r, g, b] of shot.pixels.slice(0, 3)) {
      expect(r).toBeGreaterThan(200);
      expect(g).toBeLessThan(90);
      expect(b).toBeGreaterThan(120);
    }
    expect(Math.min(...(shot.pixels[3] ?? []))).toBeGreaterThan(235);

    // The page is as before: same evidence, and the revision still current (an act on it is accepted).
    const observed = await worker.call('POST', `${path}/observe`, { body: {} });
    expect(observed.body.evidence_key).toBe(navigated.body.evidence_key);
    const acted = await worker.call('POST', `${path}/act`, {
      body: {
        sequence: 2,
        args: { revision: observed.body.observation.revision, element: button.ref, action: 'click' },
      },
    });
    expect(acted.status).toBe(200);

    const stale = await worker.call('POST', `${path}/preview`, {
      body: { args: { revision, element: button.ref } },
    });
    expect(stale.status).toBe(409);
    expect(stale.body.error.code).toBe('page_changed');
  });

  it('answers an act at once when the store cannot write its screenshot, and counts the failure', async () => {
    const path = await lease('run_shot_broken');
    // The run's folder cannot be made: a file sits where the tenant's folder goes.
    await rm(join(dir, 't1'), { recursive: true, force: true });
    await writeFile(join(dir, 't1'), 'not a folder');
    try {
      const navigated = await worker.call('POST', `${path}/navigate`, {
        body: { sequence: 1, url: `${origin}/` },
      });
      expect(navigated.status).toBe(200);
      expect(navigated.body.observation.title).toBe('Colours');
      expect(navigated.body.artifacts.screenshot).toMatch(/^shot-/);
      const metrics = async () =>
        (await fetch(`${worker.url}/metrics`, { headers: { authorization: `Bearer ${TEST_TOKEN}` } })).text();
      await expect
        .poll(metrics, { timeout: 15_000 })
        .toMatch(/leasehold_screenshot_failures_total\{stage="store"\} [1-9]/);
    } finally {
      await rm(join(dir, 't1'), { force: true });
    }
  });
});
