import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { Redis } from 'ioredis';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDataPlaneServer } from '../../libs/lease/http/index.js';
import { dataPlaneOpenApiDocument } from '../../libs/lease/http/openapi.js';
import { LeaseService, type PageFactory, PlaywrightPageFactory } from '../../libs/lease/index.js';
import { RedisLeaseStore } from '../../libs/store/index.js';
import { createLeaseMetrics, createMetrics, FailedAuthLimiter } from '../../libs/telemetry/index.js';
import {
  idemKey,
  leaseOwnProfile,
  startTestBrowserWorker,
  TEST_TOKEN,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { silentLogger } from '../fixtures/logger.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

const run = promisify(execFile);

interface Operation {
  operationId?: string;
  summary?: string;
  security?: unknown[];
  responses: Record<string, unknown>;
}
type Paths = Record<string, Record<string, Operation>>;

const document = dataPlaneOpenApiDocument() as {
  paths: Paths;
  components: { schemas: Record<string, unknown> };
};

function operations(): Array<{ method: string; path: string; operation: Operation }> {
  return Object.entries(document.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, operation]) => ({ method, path, operation })),
  );
}

/** Every `$ref` anywhere in `value`. */
function refsIn(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(refsIn);
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([key, inner]) =>
    key === '$ref' && typeof inner === 'string' ? [inner] : refsIn(inner),
  );
}

/** A validator of the document's named schemas, as a client generated from it would read them. */
function componentValidator() {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addSchema({ $id: 'https://leasehold.test/data-plane', components: document.components });
  return (component: string, body: unknown) => {
    const validate = ajv.getSchema(`https://leasehold.test/data-plane#/components/schemas/${component}`);
    if (!validate) throw new Error(`no component ${component}`);
    const valid = validate(body);
    return { valid, errors: JSON.stringify(validate.errors) };
  };
}

describe('the data plane’s OpenAPI document', () => {
  it('lints with redocly without an error', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lh-dp-openapi-'));
    try {
      const file = join(dir, 'data-plane.json');
      await writeFile(file, JSON.stringify(document, null, 2));
      const lint = await run('npx', ['redocly', 'lint', '--format=json', file], {
        cwd: process.cwd(),
        maxBuffer: 16 * 1024 * 1024,
      }).catch((failure: { stdout: string }) => failure);
      const report = JSON.parse(lint.stdout) as { totals: { errors: number }; problems: unknown[] };
      expect(report.totals.errors, JSON.stringify(report.problems)).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('gives every route an operationId, a summary, its answers and the refusals it really makes', () => {
    const ids = operations().map(({ operation }) => operation.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const { operation } of operations()) {
      expect(operation.operationId).toMatch(/^[a-z][A-Za-z]+$/);
      expect(operation.summary).toBeTruthy();
      expect(Object.keys(operation.responses).some((status) => status.startsWith('2'))).toBe(true);
      expect(operation.responses).toHaveProperty('500');
    }
    const statuses = (path: string, method: string) =>
      Object.keys(document.paths[path]?.[method]?.responses ?? {}).map(Number);
    const lease = '/v1/tenants/{tenant}/profiles/{profileId}/leases/{leaseId}';
    expect(statuses('/v1/tenants/{tenant}/profiles/{profileId}/leases', 'post')).toEqual(
      expect.arrayContaining([200, 201, 401, 404, 409, 413, 422, 429, 503]),
    );
    expect(statuses(`${lease}/act`, 'post')).toEqual(
      expect.arrayContaining([200, 401, 404, 409, 422, 502, 503]),
    );
    expect(statuses('/v1/tenants/{tenant}/profiles', 'post')).toEqual(
      expect.arrayContaining([201, 409, 413, 415, 422]),
    );
    expect(statuses('/v1/tenants/{tenant}/profiles', 'post')).not.toContain(200);
    expect(statuses('/readyz', 'get')).toEqual(expect.arrayContaining([200, 503]));
    // The ops routes are public; everything else needs the token.
    expect(document.paths['/healthz']?.get?.security).toEqual([]);
    expect(document.paths['/v1/worker']?.get?.security).toBeUndefined();
    expect(statuses('/healthz', 'get')).not.toContain(401);
  });

  it('gives examples its own schemas accept', () => {
    const validate = componentValidator();
    let examples = 0;
    for (const { method, path, operation } of operations()) {
      const media = (
        operation as {
          requestBody?: { content: Record<string, { schema: { $ref: string }; example?: unknown }> };
        }
      ).requestBody?.content['application/json'];
      if (media?.example === undefined) continue;
      examples += 1;
      const checked = validate(media.schema.$ref.split('/').pop() as string, media.example);
      expect(checked.valid, `${method} ${path}: ${checked.errors}`).toBe(true);
    }
    expect(examples).toBeGreaterThanOrEqual(8);
  });

  it('leaves no reference dangling', () => {
    for (const ref of refsIn(document)) {
      const [, kind, name] = ref.match(/^#\/components\/([A-Za-z]+)\/([A-Za-z0-9_]+)$/) ?? [];
      expect(kind, ref).toBeTruthy();
      expect((document.components as Record<string, Record<string, unknown>>)[kind as string]).toHaveProperty(
        name as string,
      );
    }
  });
});

describe('a browser worker and its document', () => {
  const prefix = uniquePrefix('dp-openapi');
  let worker: TestBrowserWorker;
  let browser: Browser | undefined;
  let site: Server;
  let origin: string;
  const validate = componentValidator();

  // An observation field the contract lacks: the worker must not let it leave.
  const leakyPages = (launched: () => Browser): PageFactory => {
    browser = launched();
    const pages = new PlaywrightPageFactory(launched);
    return {
      openContexts: () => pages.openContexts(),
      async open(input) {
        const session = await pages.open(input);
        return {
          ...session,
          navigate: session.navigate.bind(session),
          act: session.act.bind(session),
          storageState: session.storageState.bind(session),
          dispose: session.dispose.bind(session),
          ...(session.previewTarget ? { previewTarget: session.previewTarget.bind(session) } : {}),
          ...(session.screenshot ? { screenshot: session.screenshot.bind(session) } : {}),
          async observe(args, limits) {
            const result = await session.observe(args, limits);
            return { ...result, observation: { ...(result.observation as object), debug_html: '<secret/>' } };
          },
        };
      },
    };
  };

  beforeAll(async () => {
    worker = await startTestBrowserWorker({ prefix, pages: leakyPages });
    site = createServer((_request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end('<!doctype html><title>Shop</title><button>Buy</button>');
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await worker?.handle.close();
    await new Promise((resolve) => site?.close(resolve));
    const redis = new Redis(testRedisUrl());
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  it('serves the document at /docs/json behind the data-plane token', async () => {
    const refused = await worker.call('GET', '/docs/json', { token: null });
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('unauthorized');
    const served = await worker.call('GET', '/docs/json');
    expect(served.status).toBe(200);
    expect(served.body).toEqual(JSON.parse(JSON.stringify(document)));
  });

  it('answers with bodies the document’s schemas accept, and refusals in its error shape', async () => {
    const profileId = `shop-${randomBytes(4).toString('hex')}`;
    const created = await worker.call('POST', '/v1/tenants/t1/profiles', {
      body: { id: profileId, principal: 'owner', allowed_origins: [origin] },
    });
    expect(created.status).toBe(201);
    expect(validate('Profile', created.body)).toMatchObject({ valid: true });

    const acquired = await worker.call('POST', `/v1/tenants/t1/profiles/${profileId}/leases`, {
      idempotencyKey: idemKey(),
      body: {
        tenant: 't1',
        principal: 'owner',
        run_id: 'run_1',
        attempt: 1,
        requested_expires_at_ms: Date.now() + 600_000,
      },
    });
    expect(acquired.status).toBe(201);
    expect(validate('AcquiredLease', acquired.body)).toMatchObject({ valid: true });
    const lease = `/v1/tenants/t1/profiles/${profileId}/leases/${acquired.body.lease_id}`;

    const navigated = await worker.call('POST', `${lease}/navigate`, {
      body: { sequence: 1, url: `${origin}/` },
    });
    expect(navigated.status).toBe(200);
    const checked = validate('PageAnswer', navigated.body);
    expect(checked.valid, checked.errors).toBe(true);

    const worker_ = await worker.call('GET', '/v1/worker');
    expect(validate('Worker', worker_.body)).toMatchObject({ valid: true });

    const stale = await worker.call('POST', `${lease}/navigate`, {
      body: { sequence: 1, url: `${origin}/` },
    });
    expect(stale.status).toBe(409);
    expect(stale.body.error.code).toBe('sequence_mismatch');
    expect(validate('DataPlaneError', stale.body)).toMatchObject({ valid: true });
    expect(
      Object.keys(
        document.paths['/v1/tenants/{tenant}/profiles/{profileId}/leases/{leaseId}/navigate']?.post
          ?.responses ?? {},
      ),
    ).toContain('409');
  });

  it('lets no field the answer schema lacks leave the worker', async () => {
    const { path } = await leaseOwnProfile(worker, 'leak', `run_${randomBytes(4).toString('hex')}`, origin);
    await worker.call('POST', `${path}/navigate`, { body: { sequence: 1, url: `${origin}/` } });
    const observed = await worker.call('POST', `${path}/observe`, { body: {} });
    expect(observed.status).toBe(200);
    expect(observed.body.observation.title).toBe('Shop');
    expect(observed.body.observation).not.toHaveProperty('debug_html');
    expect(validate('ObserveAnswer', observed.body)).toMatchObject({ valid: true });
  });

  it('starts only when every route it registers is in the document', async () => {
    if (!browser) throw new Error('the worker launched no browser');
    const redis = new Redis(testRedisUrl());
    const registry = createMetrics().registry;
    const store = new RedisLeaseStore(redis, `${prefix}:`);
    const app = createDataPlaneServer({
      logger: silentLogger(),
      token: TEST_TOKEN,
      failures: new FailedAuthLimiter(redis, `${prefix}:`, 10),
      leases: new LeaseService({
        store,
        pages: new PlaywrightPageFactory(browser),
        workerId: 'bw-undocumented',
        pinnedProfiles: '*',
        sealKey: randomBytes(32),
        logger: silentLogger(),
        metrics: createLeaseMetrics(registry),
      }),
      store,
      worker: { id: 'bw-undocumented', pinnedProfiles: '*', browserVersion: 'test' },
      metrics: registry,
      readiness: () => [],
    });
    try {
      // Every documented operation is a route of the server…
      for (const { method, path } of operations())
        expect(
          app.hasRoute({ method: method.toUpperCase() as 'GET', url: path.replace(/\{(\w+)\}/g, ':$1') }),
          `${method} ${path}`,
        ).toBe(true);
      // …and a route the document lacks stops it at start-up.
      app.get('/v1/undocumented', async () => ({}));
      await expect(app.ready()).rejects.toThrow(/GET \/v1\/undocumented/);
    } finally {
      await app.close().catch(() => undefined);
      redis.disconnect();
    }
  });
});
