import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/** A receipt a run attaches: bytes no text encoding would keep as they are. */
const RECEIPT = Buffer.concat([
  Buffer.from('%PDF-1.7\n'),
  randomBytes(4 * 1024),
  Buffer.from([0, 255, 13, 10]),
]);
/** The test fleet's upload limit (UPLOAD_MAX_BYTES): RECEIPT fits, a file past it does not. */
const UPLOAD_LIMIT_BYTES = 32 * 1024;

/**
 * Files into a run (DESIGN §12): a file uploaded to the API is listed by a run's input, and the
 * run's `upload` act sets a page's file input to it; the page's server receives it byte-identical.
 * An upload to anything but a file input is refused before dispatch, and another tenant's file
 * is refused at submit.
 */
describe('uploads into a run’s pages', () => {
  let fleet: FleetHandle;
  let site: Server;
  let origin: string;
  /** What the page's server received: each body posted to /upload, with the name it was sent under. */
  const received: Array<{ name: string; type: string; body: Buffer }> = [];
  const prefix = uniquePrefix('run-uploads');
  const { call, waitForStatus, boundSession } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    site = createServer((request, response) => {
      if (request.method === 'POST' && request.url === '/upload') {
        const chunks: Buffer[] = [];
        request.on('data', (chunk: Buffer) => chunks.push(chunk));
        request.on('end', () => {
          received.push({
            name: decodeURIComponent(String(request.headers['x-file-name'] ?? '')),
            type: String(request.headers['content-type'] ?? ''),
            body: Buffer.concat(chunks),
          });
          response.end('ok');
        });
        return;
      }
      response.setHeader('content-type', 'text/html');
      // The file input posts what it is given as it is; the button would post if it were clicked.
      response.end(`<!doctype html><title>Claims</title><h1>Claim</h1>
<label>Receipt <input type="file" id="receipt"></label>
<button type="button" onclick="fetch('/upload', {method: 'POST', body: 'clicked'})">Send claim</button>
<script>
document.getElementById('receipt').addEventListener('change', async (event) => {
  const file = event.target.files[0];
  await fetch('/upload', {
    method: 'POST',
    headers: { 'x-file-name': encodeURIComponent(file.name), 'content-type': file.type },
    body: file,
  });
  document.querySelector('h1').textContent = 'Receipt sent';
});
</script>`);
    });
    await new Promise<void>((ready) => site.listen(0, '127.0.0.1', () => ready()));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    fleet = await startTestFleet(prefix, { UPLOAD_MAX_BYTES: String(UPLOAD_LIMIT_BYTES) });
  });

  afterAll(async () => {
    await fleet?.close();
    await new Promise((done) => site?.close(done));
  });

  async function upload(bytes: Buffer, name: string, type: string, key = fleet.apiKey) {
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(bytes)], { type }), name);
    const response = await fetch(`${fleet.urls.api}/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
    return { status: response.status, body: await response.json() };
  }

  /** Runs a script that opens the page and uploads `file` to the element `target`, approving each act. */
  async function uploadTo(profileId: string, file: string, target: { role: string; name: string }) {
    const sessionId = await boundSession({ profileId, origin, instructions: 'Attach the receipt.' });
    const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
      input: 'Attach the receipt',
      files: [file],
      script: {
        steps: [
          { tool: 'browser.navigate', url: `${origin}/` },
          { tool: 'browser.act', target, action: 'upload', file },
        ],
        answer: 'Attached.',
      },
    });
    expect(submitted.status).toBe(201);
    // biome-ignore lint/suspicious/noExplicitAny: approval cards, asserted field by field.
    const cards: any[] = [];
    let run = await waitForStatus(submitted.body.id, ['parked', 'succeeded', 'failed'], 60_000);
    while (run.status === 'parked') {
      cards.push(run.pending_approvals[0].card);
      const approved = await call('POST', `/v1/approvals/${run.pending_approvals[0].id}/approve`, {});
      expect(approved.status).toBe(200);
      run = await waitForStatus(run.id, ['parked', 'succeeded', 'failed'], 60_000);
    }
    const steps = (await call('GET', `/v1/runs/${run.id}/steps`)).body.steps;
    const act = steps.find((step: { tool: { name: string } | null }) => step.tool?.name === 'browser.act');
    return { run, act, cards };
  }

  it('uploads a file through a file input, and the page’s server receives it byte-identical', async () => {
    const uploaded = await upload(RECEIPT, 'receipt.pdf', 'application/pdf');
    expect(uploaded.status).toBe(201);
    const sha256 = createHash('sha256').update(RECEIPT).digest('hex');
    expect(uploaded.body).toEqual(
      expect.objectContaining({
        name: 'receipt.pdf',
        content_type: 'application/pdf',
        size_bytes: RECEIPT.byteLength,
        sha256,
      }),
    );
    const fileId = uploaded.body.id as string;
    expect(fileId).toMatch(/^fil_/);
    // Unused, it expires 7 days after it was made.
    expect(uploaded.body.expires_at_ms).toBe(uploaded.body.created_at_ms + 7 * 86_400_000);

    const { run, act, cards } = await uploadTo('claims', fileId, { role: 'button', name: 'Receipt' });
    expect(run.status).toBe('succeeded');
    expect(act.tool.outcome).toEqual(expect.objectContaining({ ok: true }));
    // The person approving it saw which file would leave.
    expect(cards).toEqual([
      expect.objectContaining({ action: 'upload', file: { id: fileId, name: 'receipt.pdf' } }),
    ]);

    await expect.poll(() => received.length).toBe(1);
    expect(received[0]?.name).toBe('receipt.pdf');
    expect(received[0]?.type).toBe('application/pdf');
    expect(received[0]?.body.equals(RECEIPT)).toBe(true);

    // Held by the run, it no longer expires on its own: it goes with the run.
    const read = await call('GET', `/v1/files/${fileId}`);
    expect(read.status).toBe(200);
    expect(read.body).toEqual(expect.objectContaining({ id: fileId, sha256, expires_at_ms: null }));
  }, 120_000);

  it('refuses an upload to an element that is not a file input before anything is dispatched', async () => {
    const before = received.length;
    const uploaded = await upload(RECEIPT, 'receipt.pdf', 'application/pdf');
    const fileId = uploaded.body.id as string;
    const { run, act } = await uploadTo('claims-button', fileId, { role: 'button', name: 'Send claim' });
    expect(run.status).toBe('failed');
    expect(run.error).toEqual(expect.objectContaining({ code: 'action_not_allowed' }));
    expect(act.tool.outcome).toEqual(
      expect.objectContaining({
        ok: false,
        code: 'action_not_allowed',
        message: expect.stringContaining('refused before dispatch'),
      }),
    );
    // Nothing reached the page: the button was not clicked and no file was sent.
    expect(received.length).toBe(before);
  }, 120_000);

  it('refuses at submit a file of another tenant or none at all, and a file past the limit at upload', async () => {
    const { key } = await fleet.store.createApiKey({
      tenant: 'other',
      principal: 'mallory',
      scopes: ['runs:write', 'runs:read'],
    });
    const theirs = await upload(RECEIPT, 'theirs.pdf', 'application/pdf', key);
    expect(theirs.status).toBe(201);
    // Another tenant's file is not found, to read or to list.
    expect((await call('GET', `/v1/files/${theirs.body.id}`)).status).toBe(404);
    const sessionId = await boundSession({ profileId: 'claims-foreign', origin, instructions: 'Attach.' });
    for (const file of [theirs.body.id, 'fil_00000000000000000000']) {
      const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
        input: 'Attach the receipt',
        files: [file],
      });
      expect(submitted.status).toBe(404);
      expect(submitted.body.error).toEqual({ code: 'not_found', message: `file ${file} not found` });
    }
    expect((await call('GET', '/v1/runs?limit=50')).body.runs).toEqual(
      expect.not.arrayContaining([expect.objectContaining({ session_id: sessionId })]),
    );

    const tooLarge = await upload(randomBytes(UPLOAD_LIMIT_BYTES + 1), 'big.bin', 'application/octet-stream');
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body.error.code).toBe('payload_too_large');
  }, 120_000);
});
