import { readdir } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/**
 * The fleet opens one artifact store and hands it to every role, so the screenshot the
 * browser worker writes after a navigate is the one the API serves. The test fleet's store is a
 * temp folder of its own, never the repository's .leasehold/.
 */
describe('the fleet’s artifact store', () => {
  let fleet: FleetHandle;
  let site: Server;
  let origin: string;
  const { call, waitForStatus, boundSession } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    site = createServer((_request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end('<!doctype html><title>Shelf</title><h1 style="color:#c00">Shelf</h1>');
    });
    await new Promise<void>((ready) => site.listen(0, '127.0.0.1', () => ready()));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    fleet = await startTestFleet(uniquePrefix('fleet-artifacts'));
  });

  afterAll(async () => {
    await fleet?.close();
    await new Promise((done) => site?.close(done));
  });

  it('is a fresh temp folder, never the repository’s', () => {
    const dir = resolve(fleet.config.artifacts.dir);
    expect(dir.startsWith(resolve(tmpdir()))).toBe(true);
    expect(dir).not.toContain('.leasehold');
  });

  it('serves from the API the screenshot the browser worker wrote after a navigate', async () => {
    const sessionId = await boundSession({ profileId: 'shelf', origin, instructions: 'Look at the shelf.' });
    const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
      input: 'Look at the shelf',
      script: { steps: [{ tool: 'browser.navigate', url: `${origin}/` }], answer: 'Seen.' },
    });
    expect(submitted.status).toBe(201);
    const run = await waitForStatus(submitted.body.id, ['succeeded', 'failed', 'cancelled'], 60_000);
    expect(run.status).toBe('succeeded');
    // DESIGN §12: the screenshot is taken after the navigate answered; its step says when it is stored.
    await expect
      .poll(
        async () =>
          (await call('GET', `/v1/runs/${run.id}/steps`)).body.steps.find(
            (step: { tool: { name: string } | null }) => step.tool?.name === 'browser.navigate',
          )?.tool.screenshot_status,
        { timeout: 30_000 },
      )
      .toEqual({ state: 'stored', reason: null });

    const runs: string[] = [];
    for await (const ref of fleet.artifacts.listRuns()) runs.push(`${ref.tenant}/${ref.runId}`);
    expect(runs).toContain(`dev/${run.id}`);
    const [name] = await readdir(join(fleet.config.artifacts.dir, 'dev', run.id));
    expect(name).toMatch(/^shot-[A-Za-z0-9_-]+\.jpg$/);

    const response = await fetch(`${fleet.urls.api}/runs/${run.id}/artifacts/${name}`, {
      headers: { authorization: `Bearer ${fleet.apiKey}` },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('image/jpeg');
    const bytes = new Uint8Array(await response.arrayBuffer());
    expect([bytes[0], bytes[1], bytes[2]]).toEqual([0xff, 0xd8, 0xff]);
  }, 90_000);
});
