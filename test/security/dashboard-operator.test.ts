import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testRedisUrl } from '../fixtures/redis.js';
import { type ApiRig, startApiRig } from './api-rig.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TSX = fileURLToPath(new URL('../../node_modules/.bin/tsx', import.meta.url));

/**
 * Bull Board showed every tenant's jobs to any tenant's admin key. The dashboard is
 * behind the fleet-wide `operator` scope, which tenant keys do not get and which grants no
 * tenant's records.
 */
describe('the dashboard behind the fleet operator scope', { timeout: 30_000 }, () => {
  let rig: ApiRig;

  beforeAll(async () => {
    rig = await startApiRig('dashboard');
  });
  afterAll(() => rig?.close());

  function runCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      execFile(
        TSX,
        ['scripts/create-api-key.ts', ...args],
        {
          cwd: ROOT,
          env: { ...process.env, REDIS_URL: testRedisUrl(), LEASEHOLD_KEY_PREFIX: `${rig.prefix}:` },
          timeout: 20_000,
        },
        (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
      );
    });
  }

  it("answers a tenant admin key 401 at /admin/queues and at the board's own API", async () => {
    const admin = await rig.key('acme', 'ops', ['admin', 'runs:read', 'runs:write', 'approvals:write']);
    for (const path of ['/admin/queues', '/admin/queues/api/queues']) {
      const answer = await rig.call('GET', path, { key: admin });
      expect(answer.status, path).toBe(401);
      expect(answer.body.error.code).toBe('unauthorized');
    }
  });

  it('makes an operator key with `npm run api-key -- --operator` that opens the dashboard', async () => {
    const made = await runCli(['--operator', '--principal', 'oncall']);
    expect(made.stderr).toBe('');
    expect(made.code).toBe(0);
    const key = /^key:\s+(lhk_\S+)$/m.exec(made.stdout)?.[1] as string;
    expect(key).toBeDefined();
    expect((await rig.api.store.resolveApiKey(key))?.scopes).toEqual(['operator']);

    const board = await rig.call('GET', '/admin/queues/api/queues', { key });
    expect(board.status).toBe(200);
    expect(JSON.stringify(board.body)).toContain('runs');
    const basic = `Basic ${Buffer.from(`oncall:${key}`).toString('base64')}`;
    expect((await rig.call('GET', '/admin/queues', { headers: { authorization: basic } })).status).toBe(200);
  });

  it("grants an operator key no tenant's records: REST routes refuse it", async () => {
    const operator = (
      await rig.api.store.createApiKey({ tenant: 'acme', principal: 'oncall', scopes: ['operator'] })
    ).key;
    for (const [method, path, body] of [
      ['GET', '/v1/models', undefined],
      ['GET', '/v1/api-keys', undefined],
      ['POST', '/v1/agents', { model: 'scripted', instructions: 'x' }],
      ['GET', '/v1/approvals', undefined],
    ] as const) {
      const answer = await rig.call(method, path, { key: operator, body });
      expect(answer.status, `${method} ${path}`).toBe(401);
    }
  });

  it('never issues the operator scope through a tenant admin, nor mixed with tenant scopes by the CLI', async () => {
    const admin = await rig.key('acme', 'ops', ['admin']);
    const answer = await rig.call('POST', '/v1/api-keys', {
      key: admin,
      body: { principal: 'sneaky', scopes: ['operator'] },
    });
    expect(answer.status).toBe(422);
    const mixed = await runCli(['--tenant', 'acme', '--principal', 'ops', '--scopes', 'admin,operator']);
    expect(mixed.code).toBe(2);
    expect(mixed.stderr).toMatch(/operator/);
  });
});
