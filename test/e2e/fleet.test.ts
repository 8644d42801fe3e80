import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FleetHandle, startFleet } from '../../apps/fleet/fleet.js';
import { loadConfig } from '../../libs/config/index.js';
import { silentLogger } from '../fixtures/logger.js';
import { testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/** The handles a test process has of its own, so that only the fleet's are compared. */
function openHandles(): string[] {
  return process.getActiveResourcesInfo().filter((kind) => kind !== 'TTYWrap' && kind !== 'Timeout');
}

function fleetEnv(prefix: string): Record<string, string> {
  return {
    REDIS_URL: testRedisUrl(),
    LEASEHOLD_KEY_PREFIX: `${prefix}:`,
    QUEUE_PREFIX: prefix,
    PORT: '0',
    BROWSER_WORKER_PORT: '0',
    LOG_LEVEL: 'silent',
    ...(process.env.BROWSER_EXECUTABLE ? { BROWSER_EXECUTABLE: process.env.BROWSER_EXECUTABLE } : {}),
  };
}

describe('the fleet in one process', () => {
  let fleet: FleetHandle;
  let handlesBefore: string[];

  beforeAll(async () => {
    handlesBefore = openHandles();
    fleet = await startFleet({ config: loadConfig(fleetEnv(uniquePrefix('fleet'))), logger: silentLogger() });
  });

  afterAll(async () => {
    await fleet?.close();
  });

  it('is alive and ready, with every role reporting', async () => {
    const base = fleet.urls.api.replace(/\/v1$/, '');
    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(200);
    const body = (await ready.json()) as { status: string; checks: Array<{ name: string; ok: boolean }> };
    expect(body.status).toBe('ready');
    expect(body.checks.map((check) => check.name).sort()).toEqual(
      [
        'browser_redis',
        'browser_tools:enabled',
        'chromium',
        'redis',
        // Every ops server says whether this process's Redis connections are up.
        'redis_link',
        'run_worker',
        'runs_queue',
        'sweeper_redis',
      ].sort(),
    );
    expect(body.checks.every((check) => check.ok)).toBe(true);
  });

  it('serves Prometheus metrics of every role on the API', async () => {
    const response = await fetch(fleet.urls.metrics);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/plain');
    const text = await response.text();
    // The standard series under their standard names, for stock Node.js dashboards.
    expect(text).toMatch(/^process_cpu_seconds_total\{role="fleet"\} /m);
    expect(text).not.toContain('leasehold_process_');
    expect(text).toMatch(/^leasehold_queue_jobs\{queue="runs",state="waiting",role="fleet"\} 0$/m);
    expect(text).toContain('leasehold_sweeper_active');
    expect(text).toContain('leasehold_lease_upkeep_passes_total');
    expect(text).toMatch(/^leasehold_leases_live\{role="fleet"\} 0$/m);
    expect(text).toContain('leasehold_lease_operations_total');
  });

  it('serves the browser worker health and refuses its data plane without the token', async () => {
    expect((await fetch(`${fleet.urls.browserWorker}/readyz`)).status).toBe(200);
    const refused = await fetch(`${fleet.urls.browserWorker}/v1/worker`);
    expect(refused.status).toBe(401);
    expect(await refused.json()).toEqual({
      error: { code: 'unauthorized', message: 'a valid data-plane token is required' },
    });
    const allowed = await fetch(`${fleet.urls.browserWorker}/v1/worker`, {
      headers: { authorization: `Bearer ${fleet.config.secrets.dataPlaneToken}` },
    });
    expect(allowed.status).toBe(200);
    expect(await allowed.json()).toMatchObject({ id: 'browser-1', pinned_profiles: '*' });
  });

  it('serves the OpenAPI document, the dashboard behind the operator scope, and JSON errors for unknown routes', async () => {
    expect((await fetch(fleet.urls.docs)).status).toBe(200);
    const openapi = (await (await fetch(`${fleet.urls.docs}/json`)).json()) as {
      openapi: string;
      paths: Record<string, unknown>;
    };
    expect(openapi.openapi).toMatch(/^3\./);
    expect(Object.keys(openapi.paths)).toEqual(
      expect.arrayContaining(['/v1/sessions/{id}/runs', '/v1/runs/{id}', '/v1/approvals/{id}/approve']),
    );
    const refused = await fetch(fleet.urls.dashboard);
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toContain('Basic');
    const basic = Buffer.from(`admin:${fleet.operatorKey}`).toString('base64');
    const dashboard = await fetch(fleet.urls.dashboard, { headers: { authorization: `Basic ${basic}` } });
    expect(dashboard.status).toBe(200);
    // The board shows every tenant's jobs, so a tenant's admin key does not open it.
    expect(
      (await fetch(fleet.urls.dashboard, { headers: { authorization: `Bearer ${fleet.apiKey}` } })).status,
    ).toBe(401);
    expect(await dashboard.text()).toContain('<title>');
    const readOnly = await fleet.store.createApiKey({
      tenant: 'dev',
      principal: 'viewer',
      scopes: ['runs:read'],
    });
    expect(
      (await fetch(fleet.urls.dashboard, { headers: { authorization: `Bearer ${readOnly.key}` } })).status,
    ).toBe(401);
    // Default-deny: an unknown path answers 401 without a key, 404 only with one.
    expect((await fetch(`${fleet.urls.api}/nothing-here`)).status).toBe(401);
    const missing = await fetch(`${fleet.urls.api}/nothing-here`, {
      headers: { authorization: `Bearer ${fleet.apiKey}` },
    });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({
      error: { code: 'not_found', message: 'no route GET /v1/nothing-here' },
    });
  });

  it('shuts down cleanly, leaving no handle open', async () => {
    await fleet.close();
    await fleet.close();
    // Sockets close asynchronously after their end events; give them a moment.
    for (let i = 0; i < 50 && openHandles().length > handlesBefore.length; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(openHandles().sort()).toEqual(handlesBefore.sort());
    await expect(fetch(fleet.urls.metrics)).rejects.toThrow();
  });
});
