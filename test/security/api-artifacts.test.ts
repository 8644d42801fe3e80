import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalArtifactStore, S3ArtifactStore } from '../../libs/artifacts/index.js';
import type { ArtifactName, RunView } from '../../libs/contracts/index.js';
import { createTestSession, submitStoreRun } from '../fixtures/run-store.js';
import { startS3Server, type TestS3Server } from '../fixtures/s3-server.js';
import { type ApiRig, startApiRig } from './api-rig.js';

/**
 * `GET /v1/runs/{id}/artifacts/{name}` answers a run's screenshot to its own tenant only,
 * with the type it was stored with and headers that keep it out of shared caches and sniffing.
 * The API reads the store the browser workers write (here written directly, as they would).
 */
const JPEG = new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 0xff, 0xd9]);
const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 4]);

let dir: string;
let rig: ApiRig;
let written: LocalArtifactStore;
let run: RunView;
let acmeKey: string;
let otherKey: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'leasehold-api-artifacts-'));
  rig = await startApiRig('api-artifacts', { LEASEHOLD_ARTIFACTS_DIR: dir });
  written = await new LocalArtifactStore(dir).open();
  run = await submitStoreRun(
    rig.api.store,
    await createTestSession(rig.api.store, 'acme', { instructions: 'x' }),
  );
  await written.put(
    { tenant: 'acme', runId: run.id, name: 'shot-abc.jpg' as ArtifactName },
    JPEG,
    'image/jpeg',
  );
  await written.put(
    { tenant: 'acme', runId: run.id, name: 'preview-abc.png' as ArtifactName },
    PNG,
    'image/png',
  );
  acmeKey = await rig.key('acme', 'alice', ['runs:read']);
  otherKey = await rig.key('other', 'mallory', ['runs:read', 'admin']);
});

afterAll(async () => {
  await rig?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function fetchArtifact(path: string, key?: string) {
  const response = await fetch(`${rig.api.url}${path}`, {
    headers: key ? { authorization: `Bearer ${key}` } : {},
    signal: AbortSignal.timeout(10_000),
  });
  return {
    status: response.status,
    headers: response.headers,
    bytes: new Uint8Array(await response.arrayBuffer()),
  };
}

describe('GET /v1/runs/{id}/artifacts/{name}', () => {
  it('answers the bytes with their content type, private caching and nosniff', async () => {
    const jpeg = await fetchArtifact(`/v1/runs/${run.id}/artifacts/shot-abc.jpg`, acmeKey);
    expect(jpeg.status).toBe(200);
    expect([...jpeg.bytes]).toEqual([...JPEG]);
    expect(jpeg.headers.get('content-type')).toBe('image/jpeg');
    expect(jpeg.headers.get('cache-control')).toMatch(/^private, max-age=\d+/);
    expect(jpeg.headers.get('x-content-type-options')).toBe('nosniff');

    const png = await fetchArtifact(`/v1/runs/${run.id}/artifacts/preview-abc.png`, acmeKey);
    expect(png.status).toBe(200);
    expect([...png.bytes]).toEqual([...PNG]);
    expect(png.headers.get('content-type')).toBe('image/png');
  });

  it('answers another tenant’s run 404, as it answers a run that does not exist', async () => {
    const other = await rig.call('GET', `/v1/runs/${run.id}/artifacts/shot-abc.jpg`, { key: otherKey });
    const none = await rig.call('GET', '/v1/runs/run_doesnotexist/artifacts/shot-abc.jpg', { key: acmeKey });
    expect(other.status).toBe(404);
    expect(none.status).toBe(404);
    expect(other.body).toEqual({ error: { code: 'not_found', message: `run ${run.id} not found` } });
  });

  it('answers an artifact never written 404', async () => {
    const answer = await rig.call('GET', `/v1/runs/${run.id}/artifacts/shot-zzz.jpg`, { key: acmeKey });
    expect(answer.status).toBe(404);
    expect((answer.body as { error: { code: string } }).error.code).toBe('not_found');
  });

  it('answers a name that could never be an artifact 400, without reading the store', async () => {
    for (const name of [
      'shot-abc.gif',
      'shot-abc.jpg.html',
      '..%2F..%2Fetc%2Fpasswd',
      '.jpg',
      '%2E%2E.jpg',
    ]) {
      const answer = await rig.call('GET', `/v1/runs/${run.id}/artifacts/${name}`, { key: acmeKey });
      expect({ name, status: answer.status }).toEqual({ name, status: 400 });
      expect((answer.body as { error: { code: string } }).error.code).toBe('bad_request');
    }
  });

  it('needs a key with runs:read', async () => {
    const writeOnly = await rig.key('acme', 'bob', ['runs:write']);
    expect((await fetchArtifact(`/v1/runs/${run.id}/artifacts/shot-abc.jpg`)).status).toBe(401);
    expect((await fetchArtifact(`/v1/runs/${run.id}/artifacts/shot-abc.jpg`, writeOnly)).status).toBe(401);
  });

  it('is in the OpenAPI document with a binary image response', async () => {
    const docs = await rig.call('GET', '/docs/json');
    const paths = (docs.body as { paths: Record<string, Record<string, unknown>> }).paths;
    const route = paths['/v1/runs/{id}/artifacts/{name}']?.get as {
      responses: Record<string, { content: Record<string, { schema: { type: string; format?: string } }> }>;
    };
    expect(route.responses['200']?.content['image/jpeg']?.schema).toMatchObject({
      type: 'string',
      format: 'binary',
    });
    expect(route.responses['200']?.content['image/png']?.schema).toMatchObject({
      type: 'string',
      format: 'binary',
    });
  });
});

describe('the artifact route over an S3-compatible bucket', () => {
  let s3: TestS3Server;
  let bucketRig: ApiRig;

  beforeAll(async () => {
    s3 = await startS3Server();
    // The API opens the bucket from its config; credentials from the AWS SDK's own chain.
    process.env.AWS_ACCESS_KEY_ID = s3.credentials.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = s3.credentials.secretAccessKey;
    bucketRig = await startApiRig('api-artifacts-s3', {
      LEASEHOLD_ARTIFACTS_DIR: join(dir, 'unused'),
      LEASEHOLD_ARTIFACTS_S3_BUCKET: s3.bucket,
      LEASEHOLD_ARTIFACTS_S3_ENDPOINT: s3.endpoint,
    });
  });
  afterAll(async () => {
    await bucketRig?.close();
    await s3?.close();
  });

  it('serves an artifact a browser worker put in the bucket', async () => {
    const store = bucketRig.api.store;
    const bucketRun = await submitStoreRun(
      store,
      await createTestSession(store, 'acme', { instructions: 'x' }),
    );
    const writer = new S3ArtifactStore(
      { bucket: s3.bucket, endpoint: s3.endpoint, region: s3.region, prefix: 'leasehold/' },
      { credentials: s3.credentials },
    );
    await writer.put(
      { tenant: 'acme', runId: bucketRun.id, name: 'shot-s3.jpg' as ArtifactName },
      JPEG,
      'image/jpeg',
    );
    writer.close();
    const key = (await store.createApiKey({ tenant: 'acme', principal: 'alice', scopes: ['runs:read'] })).key;
    const response = await fetch(`${bucketRig.api.url}/v1/runs/${bucketRun.id}/artifacts/shot-s3.jpg`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('image/jpeg');
    expect([...new Uint8Array(await response.arrayBuffer())]).toEqual([...JPEG]);
  });
});
