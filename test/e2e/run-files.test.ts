import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import type { TranscriptEntry } from '../../libs/runtime/index.js';
import { RunTranscripts } from '../../libs/store/run-transcript.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/** The export a page hands out, and a file past the test fleet's lowered per-file limit. */
const CSV = Buffer.from('id,name,total\n1,Ada,12.50\n2,Grace,7.25\n3,"Linus, jr",0.99\n');
const BIG = randomBytes(64 * 1024);
/** The test fleet's per-file download limit (BROWSER_DOWNLOAD_MAX_BYTES): BIG passes it. */
const DOWNLOAD_LIMIT_BYTES = 16 * 1024;

/**
 * Files out of a run (DESIGN §12): what a lease's page downloads is kept under the run with its
 * name, type, size and SHA-256, listed and served byte-identical by the API; a file past the limit
 * is cancelled and said, to the step and to the model.
 */
describe('downloads of a run’s pages', () => {
  let fleet: FleetHandle;
  let site: Server;
  let origin: string;
  /** Another origin, outside every profile's allowed list: it counts what reaches it. */
  let foreign: Server;
  let foreignOrigin: string;
  let foreignRequests = 0;
  const prefix = uniquePrefix('run-files');
  const { call, waitForStatus, boundSession } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    foreign = createServer((_request, response) => {
      foreignRequests += 1;
      response.setHeader('content-disposition', 'attachment; filename="leak.csv"');
      response.end(CSV);
    });
    await new Promise<void>((ready) => foreign.listen(0, '127.0.0.1', () => ready()));
    foreignOrigin = `http://127.0.0.1:${(foreign.address() as AddressInfo).port}`;
    site = createServer((request, response) => {
      if (request.url === '/export.csv') {
        response.setHeader('content-type', 'text/csv');
        response.setHeader('content-disposition', 'attachment; filename="orders.csv"');
        response.end(CSV);
        return;
      }
      if (request.url === '/archive.bin') {
        response.setHeader('content-type', 'application/octet-stream');
        response.setHeader('content-disposition', 'attachment; filename="archive.bin"');
        response.end(BIG);
        return;
      }
      response.setHeader('content-type', 'text/html');
      response.end(
        `<!doctype html><title>Orders</title><h1>Orders</h1><a href="/export.csv">Export CSV</a> <a href="/archive.bin">Download archive</a> <a href="${foreignOrigin}/leak.csv">Foreign export</a>`,
      );
    });
    await new Promise<void>((ready) => site.listen(0, '127.0.0.1', () => ready()));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    fleet = await startTestFleet(prefix, {
      BROWSER_DOWNLOAD_MAX_BYTES: String(DOWNLOAD_LIMIT_BYTES),
    });
  });

  afterAll(async () => {
    await fleet?.close();
    await new Promise((done) => site?.close(done));
    await new Promise((done) => foreign?.close(done));
  });

  /** Runs a script that opens the page and clicks `link`, approving the act; answers the ended run. */
  async function clickLink(profileId: string, link: string) {
    const sessionId = await boundSession({ profileId, origin, instructions: 'Fetch the export.' });
    const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
      input: 'Fetch the export',
      script: {
        steps: [
          { tool: 'browser.navigate', url: `${origin}/` },
          { tool: 'browser.act', target: { role: 'link', name: link }, action: 'click' },
        ],
        answer: 'Fetched.',
      },
    });
    expect(submitted.status).toBe(201);
    let run = await waitForStatus(submitted.body.id, ['parked', 'succeeded', 'failed'], 60_000);
    while (run.status === 'parked') {
      const approved = await call('POST', `/v1/approvals/${run.pending_approvals[0].id}/approve`, {});
      expect(approved.status).toBe(200);
      run = await waitForStatus(run.id, ['parked', 'succeeded', 'failed'], 60_000);
    }
    const steps = (await call('GET', `/v1/runs/${run.id}/steps`)).body.steps;
    const click = steps.find((step: { tool: { name: string } | null }) => step.tool?.name === 'browser.act');
    return { run, click };
  }

  it('keeps the CSV an export link downloads, lists it with its SHA-256 and serves it byte-identical', async () => {
    const { run, click } = await clickLink('orders', 'Export CSV');
    expect(run.status).toBe('succeeded');
    const sha256 = createHash('sha256').update(CSV).digest('hex');

    const listed = await call('GET', `/v1/runs/${run.id}/files`);
    expect(listed.status).toBe(200);
    expect(listed.body.files).toEqual([
      expect.objectContaining({
        name: 'orders.csv',
        content_type: 'text/csv',
        size_bytes: CSV.byteLength,
        sha256,
        state: 'stored',
        reason: null,
      }),
    ]);
    const fileId = listed.body.files[0].id as string;
    // The step of the click that started it names it.
    expect(click.tool.downloads).toEqual([expect.objectContaining({ id: fileId, sha256 })]);

    const response = await fetch(`${fleet.urls.api}/runs/${run.id}/files/${fileId}`, {
      headers: { authorization: `Bearer ${fleet.apiKey}` },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/csv');
    expect(response.headers.get('content-disposition')).toContain('attachment; filename="orders.csv"');
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    expect(response.headers.get('content-security-policy')).toBe('sandbox');
    expect(Buffer.from(await response.arrayBuffer()).equals(CSV)).toBe(true);

    // Another tenant's key finds neither the list nor the file.
    const { key } = await fleet.store.createApiKey({
      tenant: 'other',
      principal: 'mallory',
      scopes: ['runs:read'],
    });
    expect((await call('GET', `/v1/runs/${run.id}/files`, undefined, { key })).status).toBe(404);
    expect((await call('GET', `/v1/runs/${run.id}/files/${fileId}`, undefined, { key })).status).toBe(404);
  }, 120_000);

  it('cancels a download past the per-file limit, keeps nothing of it and says so on the step and to the model', async () => {
    const { run, click } = await clickLink('archive', 'Download archive');
    expect(run.status).toBe('succeeded');

    const listed = await call('GET', `/v1/runs/${run.id}/files`);
    expect(listed.body.files).toEqual([
      expect.objectContaining({ name: 'archive.bin', state: 'cancelled', reason: 'too_large', sha256: null }),
    ]);
    const fileId = listed.body.files[0].id as string;
    expect(click.tool.downloads).toEqual([expect.objectContaining({ id: fileId, reason: 'too_large' })]);
    expect((await call('GET', `/v1/runs/${run.id}/files/${fileId}`)).status).toBe(404);

    // The model was told: the click's answer in the transcript names the cancelled download.
    const redis = new Redis(testRedisUrl());
    const transcript = await new RunTranscripts(redis, `${prefix}:`)
      .load<TranscriptEntry>(run.id)
      .finally(() => redis.quit());
    const answer = transcript.find(
      (entry: { kind: string; name?: string }) => entry.kind === 'tool' && entry.name === 'browser.act',
    ) as unknown as { outcome: { ok: boolean; result: { downloads: unknown[] } } };
    expect(answer.outcome.result.downloads).toEqual([
      expect.objectContaining({ file_id: fileId, name: 'archive.bin', cancelled: 'too_large' }),
    ]);
  }, 120_000);

  it('refuses a download from an origin outside the profile’s list like any other request', async () => {
    const { run, click } = await clickLink('foreign', 'Foreign export');
    // The fence blocks the navigation the link starts: the act fails url_disallowed, nothing arrives.
    expect(click.tool.outcome).toEqual(expect.objectContaining({ ok: false, code: 'url_disallowed' }));
    expect(click.tool.downloads).toEqual([]);
    expect((await call('GET', `/v1/runs/${run.id}/files`)).body.files).toEqual([]);
    expect(foreignRequests).toBe(0);
  }, 120_000);
});
