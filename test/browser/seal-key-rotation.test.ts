import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiHandle } from '../../apps/api/server.js';
import { decodeKey } from '../../libs/config/index.js';
import type { RunView } from '../../libs/contracts/index.js';
import { keyFingerprint, sealedWith } from '../../libs/lease/seal.js';
import type { TranscriptEntry } from '../../libs/runtime/index.js';
import {
  type BrowserWorkerRecord,
  BrowserWorkerRegistry,
  RedisLeaseStore,
  RunStore,
} from '../../libs/store/index.js';
import { RunTranscripts } from '../../libs/store/run-transcript.js';
import { createRunsQueue, type RunsQueue } from '../../queues/index.js';
import { startTestApi } from '../fixtures/api.js';
import { startTestBrowserWorker, TEST_TOKEN, type TestBrowserWorker } from '../fixtures/browser-worker.js';
import { claimAndExecute, submitTestRun } from '../fixtures/execute-run.js';
import { type FaultProxy, startFaultProxy } from '../fixtures/fault-proxy.js';
import { ACQUIRE_PATH } from '../fixtures/lease-rig.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

const WORKER_ID = 'bw-seal';
const PROFILE = 'mail';
const OLD_KEY = randomBytes(32).toString('base64');
const NEW_KEY = randomBytes(32).toString('hex');

/**
 * A site that signs a visitor in by cookie: `/signin` sets a session cookie, `/account` greets a
 * visitor who brings it and says "Signed out" to one who does not. Each `/account` visit records
 * whether the cookie came.
 */
async function startCookieSite(): Promise<{
  origin: string;
  accountVisits: boolean[];
  close(): Promise<void>;
}> {
  const accountVisits: boolean[] = [];
  const page = (title: string) =>
    `<!doctype html><html lang="en"><head><title>${title}</title></head><body><h1>${title}</h1></body></html>`;
  const server: Server = createServer((request, response) => {
    const signedIn = /(?:^|;\s*)session=ada(?:;|$)/.test(request.headers.cookie ?? '');
    response.setHeader('content-type', 'text/html; charset=utf-8');
    if (request.url === '/signin') {
      response.setHeader('set-cookie', 'session=ada; Path=/; Max-Age=3600; HttpOnly');
      response.end(page('Signed in'));
      return;
    }
    if (request.url === '/account') {
      accountVisits.push(signedIn);
      response.end(page(signedIn ? 'Signed in as ada' : 'Signed out'));
      return;
    }
    response.statusCode = 404;
    response.end(page('Not found'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    accountVisits,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The registry as the run worker reads it, except that the browser worker answers behind the proxy. */
class ProxiedRegistry extends BrowserWorkerRegistry {
  constructor(
    redis: Redis,
    prefix: string,
    private readonly proxyUrl: () => string,
  ) {
    super(redis, prefix);
  }

  override async findForProfile(): Promise<BrowserWorkerRecord> {
    return { id: WORKER_ID, url: this.proxyUrl(), pinnedProfiles: '*', heartbeatAtMs: Date.now() };
  }
}

/**
 * Truthful causes: one browser worker, restarted with other seal keys between runs on one profile.
 * With a key that did not seal the profile's state the run fails `seal_key_mismatch` on its first
 * acquisition attempt, and the profile says so on both surfaces; given the old key among its
 * previous keys the same worker opens the state, the next run is signed in, and its clean close
 * seals the state under the current key.
 */
describe('a browser worker whose seal key did not seal the profile', { timeout: 120_000 }, () => {
  const prefix = uniquePrefix('seal-rotation');
  let redis: Redis;
  let store: RunStore;
  let transcripts: RunTranscripts;
  let leases: RedisLeaseStore;
  let queue: RunsQueue;
  let site: Awaited<ReturnType<typeof startCookieSite>>;
  let api: ApiHandle;
  let worker: TestBrowserWorker | undefined;
  let proxy: FaultProxy | undefined;

  beforeAll(async () => {
    redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
    store = new RunStore(redis, `${prefix}:`);
    transcripts = new RunTranscripts(redis, `${prefix}:`);
    leases = new RedisLeaseStore(redis, `${prefix}:`);
    queue = createRunsQueue(redis, prefix);
    site = await startCookieSite();
    api = await startTestApi(prefix);
  });

  afterAll(async () => {
    await proxy?.close();
    await worker?.handle.close();
    await api?.close();
    await site?.close();
    await queue?.obliterate({ force: true });
    await queue?.close();
    if (redis) {
      await deletePrefixedKeys(redis, prefix);
      redis.disconnect();
    }
  });

  /** (Re)starts the one browser worker with these keys, behind a fresh proxy that counts its requests. */
  async function restartWorker(env: Record<string, string>): Promise<void> {
    await proxy?.close();
    await worker?.handle.close();
    worker = await startTestBrowserWorker({ prefix, workerId: WORKER_ID, env });
    proxy = await startFaultProxy(worker.url);
  }

  /** A scripted run of tenant t1 on the profile, navigating to `path`, executed once as the run worker would. */
  async function run(path: string): Promise<RunView> {
    const submitted = await submitTestRun(store, {
      agent: { model: 'scripted', instructions: 'check the account' },
      browserProfileId: PROFILE,
      input: {
        text: 'check the account',
        script: { steps: [{ tool: 'browser.navigate', url: `${site.origin}${path}` }], answer: 'checked' },
      },
    });
    await claimAndExecute(
      {
        store,
        transcripts,
        queue,
        registry: new ProxiedRegistry(redis, `${prefix}:`, () => proxy?.url ?? ''),
        profiles: leases,
      },
      submitted,
      { prefix, env: { LEASEHOLD_DATA_PLANE_TOKEN: TEST_TOKEN } },
    );
    const view = await store.getRun(submitted.id);
    if (!view) throw new Error(`run ${submitted.id} is gone`);
    return view;
  }

  const acquires = () => proxy?.seen('POST', ACQUIRE_PATH).length ?? 0;

  async function sealedBlob(): Promise<string> {
    const blob = await redis.hget(`${prefix}:{prf:t1/${PROFILE}}:profile`, 'sealed');
    if (!blob) throw new Error('the profile holds no sealed state');
    return blob;
  }

  async function restProfile() {
    const { key } = await store.createApiKey({ tenant: 't1', principal: 'alice', scopes: ['runs:read'] });
    const response = await fetch(`${api.url}/v1/profiles/${PROFILE}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(response.status).toBe(200);
    return (await response.json()) as Record<string, unknown>;
  }

  it('fails seal_key_mismatch at the first attempt, shows it on the profile, and opens once given the old key', async () => {
    const oldFingerprint = keyFingerprint(decodeKey(OLD_KEY) as Buffer);
    const newFingerprint = keyFingerprint(decodeKey(NEW_KEY) as Buffer);

    // The profile is signed in under the old key: its run's clean close seals the cookie with it.
    await restartWorker({ LEASEHOLD_SEAL_KEY: OLD_KEY });
    const created = await worker?.call('POST', '/v1/tenants/t1/profiles', {
      body: { id: PROFILE, tenant: 't1', principal: 'alice', allowed_origins: [site.origin] },
    });
    expect(created?.status).toBe(201);
    expect(await run('/signin')).toMatchObject({ status: 'succeeded' });
    expect(sealedWith(await sealedBlob())).toBe(oldFingerprint);

    // The same worker restarted with a new key alone: the state names a key it does not hold.
    await restartWorker({ LEASEHOLD_SEAL_KEY: NEW_KEY });
    const refused = await run('/account');
    expect(refused).toMatchObject({ status: 'failed', error: { code: 'seal_key_mismatch', step: 1 } });
    expect(refused.error?.message).toContain(`profile t1/${PROFILE}`);
    expect(refused.error?.message).toContain(`browser worker ${WORKER_ID}`);
    expect(refused.error?.message).toContain(oldFingerprint);
    // ADR-0177's permanent refusal: one acquisition attempt, no retry, and no page reached.
    expect(acquires()).toBe(1);
    expect(site.accountVisits).toEqual([]);
    expect(refused.unverified).toBe(false);
    const [toolResult] = (await transcripts.load<TranscriptEntry>(refused.id)).filter(
      (entry) => entry.kind === 'tool',
    );
    expect(toolResult).toMatchObject({
      outcome: { ok: false, code: 'seal_key_mismatch', message: refused.error?.message },
    });
    // The profile shows it, naming the worker, on the data plane and the REST API; the state is kept.
    const dataPlane = await worker?.call('GET', `/v1/tenants/t1/profiles/${PROFILE}`);
    expect(dataPlane?.body).toMatchObject({
      sealed: true,
      seal_fault: {
        code: 'seal_key_mismatch',
        worker_id: WORKER_ID,
        message: expect.stringContaining(oldFingerprint),
      },
    });
    expect(await restProfile()).toMatchObject({
      sealed: true,
      seal_fault: { code: 'seal_key_mismatch', worker_id: WORKER_ID },
    });
    expect(sealedWith(await sealedBlob())).toBe(oldFingerprint);
    const metrics = await (await fetch(`${worker?.url}/metrics`)).text();
    expect(metrics).toMatch(/^leasehold_sealed_state_refusals_total\{code="seal_key_mismatch"\} 1$/m);
    // The key itself is in no answer, record or line.
    for (const key of [OLD_KEY, NEW_KEY])
      expect(JSON.stringify([refused, dataPlane?.body, metrics])).not.toContain(key);

    // With the old key among its previous keys, the same worker opens the state: signed in.
    await restartWorker({ LEASEHOLD_SEAL_KEY: NEW_KEY, LEASEHOLD_SEAL_KEYS_PREVIOUS: OLD_KEY });
    expect(await run('/account')).toMatchObject({ status: 'succeeded', error: null });
    expect(site.accountVisits).toEqual([true]);
    expect(acquires()).toBe(1);
    // Its clean close sealed the state again, under the current key, and the fault is gone.
    expect(sealedWith(await sealedBlob())).toBe(newFingerprint);
    expect((await worker?.call('GET', `/v1/tenants/t1/profiles/${PROFILE}`))?.body).toMatchObject({
      seal_fault: null,
    });
    expect(await restProfile()).toMatchObject({ seal_fault: null });

    // Rotated: the new key alone opens it from now on.
    await restartWorker({ LEASEHOLD_SEAL_KEY: NEW_KEY });
    expect(await run('/account')).toMatchObject({ status: 'succeeded' });
    expect(site.accountVisits).toEqual([true, true]);
  });

  it('calls state that does not open with the key that sealed it profile_unreadable, and keeps it', async () => {
    await restartWorker({ LEASEHOLD_SEAL_KEY: NEW_KEY });
    const profilePath = '/v1/tenants/t1/profiles/damaged';
    const acquire = (runId: string) =>
      worker?.call('POST', `${profilePath}/leases`, {
        idempotencyKey: `acquire-${runId}`,
        body: {
          tenant: 't1',
          principal: 'alice',
          run_id: runId,
          attempt: 1,
          requested_expires_at_ms: Date.now() + 600_000,
        },
      });
    await worker?.call('POST', '/v1/tenants/t1/profiles', {
      body: { id: 'damaged', tenant: 't1', principal: 'alice', allowed_origins: [site.origin] },
    });
    const lease = await acquire('run_damaged_1');
    expect(lease?.status).toBe(201);
    const leasePath = `${profilePath}/leases/${lease?.body.lease_id}`;
    await worker?.call('POST', `${leasePath}/navigate`, {
      body: { sequence: 1, url: `${site.origin}/signin` },
    });
    const closed = await worker?.call('POST', `${leasePath}/close`, {
      idempotencyKey: 'close-damaged',
      body: { seal: true },
    });
    expect(closed?.body).toMatchObject({ sealed: true });

    // One byte of the ciphertext altered; the blob still names the worker's own key.
    const profileKey = `${prefix}:{prf:t1/damaged}:profile`;
    const [version, body, fingerprint] = ((await redis.hget(profileKey, 'sealed')) ?? '').split('.');
    const bytes = Buffer.from(body ?? '', 'base64');
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) ^ 1;
    const damaged = `${version}.${bytes.toString('base64')}.${fingerprint}`;
    await redis.hset(profileKey, 'sealed', damaged);
    expect(fingerprint).toBe(keyFingerprint(decodeKey(NEW_KEY) as Buffer));

    const refused = await acquire('run_damaged_2');
    expect(refused?.status).toBe(409);
    expect(refused?.body.error).toMatchObject({
      code: 'profile_unreadable',
      tenant: 't1',
      profile_id: 'damaged',
      worker_id: WORKER_ID,
      sealed_with: fingerprint,
    });
    expect((await worker?.call('GET', profilePath))?.body).toMatchObject({
      seal_fault: { code: 'profile_unreadable', worker_id: WORKER_ID },
    });
    expect(await redis.hget(profileKey, 'sealed')).toBe(damaged);
    const metrics = await (await fetch(`${worker?.url}/metrics`)).text();
    expect(metrics).toMatch(/^leasehold_sealed_state_refusals_total\{code="profile_unreadable"\} 1$/m);
  });
});
