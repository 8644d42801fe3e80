import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RouteOptions } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { beforeAll, describe, expect, it } from 'vitest';
import { createRestServer } from '../../apps/api/rest-server.js';
import { restApiDocument } from '../../apps/api/routes/index.js';
import { answers } from '../../apps/api/routes/openapi.js';
import { type RunView, runViewSchema } from '../../libs/contracts/index.js';
import { PUBLIC_ROUTE } from '../../libs/telemetry/index.js';
import { generatedFiles } from '../../scripts/openapi.js';
import { silentLogger } from '../fixtures/logger.js';

const ROOT = join(import.meta.dirname, '..', '..');

interface Operation {
  operationId?: string;
  summary?: string;
  responses: Record<string, { content?: Record<string, unknown> }>;
  requestBody?: { content: Record<string, { example?: unknown }> };
}
interface OpenApiDocument {
  openapi: string;
  servers?: Array<{ url: string }>;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown> };
}

/** Every `$ref` anywhere in `value`. */
function refsIn(value: unknown): string[] {
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([key, child]) =>
    key === '$ref' && typeof child === 'string' ? [child] : refsIn(child),
  );
}

/** `/v1/runs/:id` as the document spells it: `/v1/runs/{id}`. */
const documentPath = (url: string) => url.replace(/:([A-Za-z_]+)/g, '{$1}');

describe('the REST API OpenAPI document', { timeout: 60_000 }, () => {
  let document: OpenApiDocument;
  const routes: RouteOptions[] = [];

  beforeAll(async () => {
    document = (await restApiDocument({
      onRoute: (route) => routes.push(route),
    })) as unknown as OpenApiDocument;
  });

  const v1Routes = () =>
    routes.flatMap((route) =>
      [route.method]
        .flat()
        .filter((method) => method !== 'HEAD' && route.url.startsWith('/v1/'))
        .map((method) => ({ method: method.toLowerCase(), route })),
    );

  it('is OpenAPI 3.1 served relative to its own server', () => {
    expect(document.openapi).toBe('3.1.0');
    expect(document.servers).toEqual([{ url: '/', description: 'This server' }]);
  });

  it('holds every /v1 route the server registers, each with an operationId, a summary and each status it answers', () => {
    const operationIds = new Set<string>();
    expect(v1Routes().length).toBe(55);
    for (const { method, route } of v1Routes()) {
      const operation = document.paths[documentPath(route.url)]?.[method];
      const where = `${method.toUpperCase()} ${route.url}`;
      expect(operation, where).toBeDefined();
      expect(operation?.operationId, where).toMatch(/^[a-z][A-Za-z]+$/);
      expect(operation?.summary, where).toBeTruthy();
      operationIds.add(operation?.operationId ?? '');
      const declared = Object.keys((route.schema as { response?: object } | undefined)?.response ?? {});
      expect(Object.keys(operation?.responses ?? {}).sort(), where).toEqual(declared.sort());
      for (const status of ['401', '429', '500', '503'])
        expect(Object.keys(operation?.responses ?? {}), where).toContain(status);
    }
    expect(operationIds.size).toBe(v1Routes().length);
  });

  it("answers submission and creations 201, revocation and deletion 204 with no body, a driving key's decision 403, events as text/event-stream", () => {
    const responses = (path: string, method: string) => document.paths[path]?.[method]?.responses ?? {};
    expect(Object.keys(responses('/v1/sessions/{id}/runs', 'post'))).toEqual(
      expect.arrayContaining(['200', '201']),
    );
    for (const path of ['/v1/profiles', '/v1/agents', '/v1/sessions', '/v1/api-keys', '/v1/webhooks'])
      expect(Object.keys(responses(path, 'post')), path).toContain('201');
    for (const path of ['/v1/api-keys/{id}', '/v1/webhooks/{id}']) {
      expect(responses(path, 'delete')['204'], path).toBeDefined();
      expect(responses(path, 'delete')['204']?.content, path).toBeUndefined();
      expect(responses(path, 'delete')['200'], path).toBeUndefined();
    }
    expect(Object.keys(responses('/v1/runs/{id}/events', 'get')['200']?.content ?? {})).toEqual([
      'text/event-stream',
    ]);
    // The key that drives a run over MCP is refused its run's approvals (apps/api/mcp).
    for (const path of ['/v1/approvals/{id}/approve', '/v1/approvals/{id}/deny'])
      expect(Object.keys(responses(path, 'post')), path).toContain('403');
    expect(responses('/v1/runs/{id}', 'get')['404']?.content).toEqual({
      'application/json': { schema: { $ref: '#/components/schemas/Error' } },
    });
    expect(
      document.paths['/v1/sessions/{id}/runs']?.post?.requestBody?.content['application/json']?.example,
    ).toEqual(expect.objectContaining({ input: expect.any(String) }));
  });

  it('has no reference that points at nothing, and no component nothing reaches', () => {
    const refs = new Set(refsIn(document));
    const names = Object.keys(document.components.schemas);
    for (const ref of refs) expect(names.map((name) => `#/components/schemas/${name}`)).toContain(ref);
    for (const name of names) expect(refs).toContain(`#/components/schemas/${name}`);
    expect(names).toEqual(
      expect.arrayContaining(['Error', 'Run', 'RunDetail', 'JsonValue', 'SubmitRunInput']),
    );
  });

  it('matches the committed files, which Redocly lints with no error', async () => {
    for (const [path, text] of await generatedFiles())
      expect(readFileSync(join(ROOT, path), 'utf8'), `${path} is stale: npm run openapi`).toBe(text);
    for (const path of ['openapi/api.json', 'openapi/data-plane.json']) {
      const lint = spawnSync('npx', ['redocly', 'lint', '--format=json', path], {
        cwd: ROOT,
        encoding: 'utf8',
      });
      const report = JSON.parse(lint.stdout) as { totals: { errors: number }; problems: unknown[] };
      expect({ path, errors: report.totals.errors }).toEqual({ path, errors: 0 });
    }
  });
});

describe('REST answers go through their schemas', () => {
  it('leaves out a field the schema lacks, and answers 500 for a record that does not fit', async () => {
    const app = (await createRestServer(silentLogger())).withTypeProvider<ZodTypeProvider>();
    const record: RunView = {
      id: 'run_0123456789abcdefghjk',
      tenant: 't',
      principal: 'p',
      session_id: 'ses_0123456789abcdefghjk',
      agent_id: 'agt_0123456789abcdefghjk',
      agent_version: 'a'.repeat(64),
      browser_profile_id: null,
      parent_run_id: null,
      waiting_on_run_id: null,
      waiting_for: null,
      status: 'queued',
      attempt: 1,
      execution: 1,
      input: { text: 'x' },
      limits: {
        max_steps: 1,
        max_model_calls: 1,
        max_tool_calls: 1,
        reserve_model_calls: 0,
        reserve_tool_calls: 0,
        max_cost_micro_usd: null,
        cost_reserve_micro_usd: 0,
        max_cost_usd: null,
      },
      usage: { steps: 0, model_calls: 0, tool_calls: 0, cost_micro_usd: 0 },
      cancel_requested: false,
      deadline_at_ms: 1,
      created_at_ms: 1,
      updated_at_ms: 1,
      ended_at_ms: null,
      result: null,
      error: null,
      unverified: false,
      unverified_error: null,
    };
    const leaking = { ...record, owner_token: 'secret' };
    app.get(
      '/leaky',
      { config: PUBLIC_ROUTE, schema: { response: answers({ 200: runViewSchema }) } },
      async () => leaking,
    );
    app.get(
      '/misfit',
      { config: PUBLIC_ROUTE, schema: { response: answers({ 200: runViewSchema }) } },
      async () => ({ ...record, status: 'lost' }) as unknown as RunView,
    );
    const leaky = await app.inject({ method: 'GET', url: '/leaky' });
    expect(leaky.statusCode).toBe(200);
    expect(leaky.json()).toEqual(record);
    const misfit = await app.inject({ method: 'GET', url: '/misfit' });
    expect(misfit.statusCode).toBe(500);
    expect(misfit.json()).toEqual({ error: { code: 'internal', message: 'internal error' } });
    await app.close();
  });
});
