import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiHandle } from '../../apps/api/server.js';
import {
  createHttpServer,
  createMetrics,
  createOpsServer,
  reshapeErrorAnswers,
} from '../../libs/telemetry/index.js';
import { TEST_TOKEN, type TestBrowserWorker } from '../fixtures/browser-worker.js';
import { silentLogger } from '../fixtures/logger.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { isOneErrorShape, rawRequest } from './auth-raw-http.js';
import { type BothServers, startBothServers } from './both-servers.js';

/**
 * Every 4xx and 5xx of both servers is `{"error":{"code","message"}}` — router
 * errors (`%ff`, an over-long segment), unknown routes, methods a path lacks, bad JSON, a wrong
 * content type, a body too large, a request that is not HTTP, and Bull Board's own answers.
 */
const apiPrefix = uniquePrefix('shape-api');
const dpPrefix = uniquePrefix('shape-dp');
let api: ApiHandle;
let worker: TestBrowserWorker;
let apiKey: string;
let operatorKey: string;
let both: BothServers;

beforeAll(async () => {
  both = await startBothServers({ apiPrefix, dpPrefix });
  ({ api, worker } = both);
  ({ key: apiKey } = await api.store.createApiKey({
    tenant: 'acme',
    principal: 'alice',
    scopes: ['admin', 'runs:read', 'runs:write'],
  }));
  ({ key: operatorKey } = await api.store.createApiKey({
    tenant: 'fleet',
    principal: 'ops',
    scopes: ['operator'],
  }));
});

afterAll(async () => {
  await both?.close();
});

const LONG = 'a'.repeat(300);
const HUGE = JSON.stringify({ name: 'x'.repeat(70 * 1024) });

type Case = [
  label: string,
  method: string,
  target: string,
  body: string | undefined,
  type: string | undefined,
  status: number,
  code: string,
];

const apiCases: Case[] = [
  ['a URL that is not percent-encoding', 'GET', '/v1/runs/%ff', undefined, undefined, 400, 'bad_request'],
  ['an over-long path segment', 'GET', `/v1/runs/run_${LONG}`, undefined, undefined, 414, 'bad_request'],
  ['an unknown route', 'GET', '/v1/nothing-here', undefined, undefined, 404, 'not_found'],
  ['a method the path lacks', 'DELETE', '/v1/models', undefined, undefined, 404, 'not_found'],
  ['bad JSON', 'POST', '/v1/agents', '{"name":', 'application/json', 400, 'bad_request'],
  ['an empty JSON body', 'POST', '/v1/agents', '', 'application/json', 400, 'bad_request'],
  ['a content type no route takes', 'POST', '/v1/agents', '<agent/>', 'application/xml', 415, 'bad_request'],
  ['a body over the limit', 'POST', '/v1/agents', HUGE, 'application/json', 413, 'payload_too_large'],
];

const dataPlaneCases: Case[] = [
  [
    'a URL that is not percent-encoding',
    'GET',
    '/v1/tenants/%ff/profiles',
    undefined,
    undefined,
    400,
    'bad_request',
  ],
  [
    'an over-long path segment',
    'GET',
    `/v1/tenants/acme/profiles/${LONG}`,
    undefined,
    undefined,
    414,
    'bad_request',
  ],
  ['an unknown route', 'GET', '/v1/nothing-here', undefined, undefined, 404, 'not_found'],
  ['a method the path lacks', 'DELETE', '/v1/worker', undefined, undefined, 404, 'not_found'],
  [
    'a content type no route takes',
    'POST',
    '/v1/tenants/acme/profiles',
    '<p/>',
    'application/xml',
    415,
    'bad_request',
  ],
  [
    'a body over the limit',
    'POST',
    '/v1/tenants/acme/profiles',
    HUGE,
    'application/json',
    413,
    'payload_too_large',
  ],
];

function send(url: string, credential: string, [, method, target, body, type]: Case) {
  return rawRequest(url, method, target, {
    headers: { authorization: `Bearer ${credential}`, ...(type ? { 'content-type': type } : {}) },
    ...(body !== undefined ? { body } : {}),
  });
}

describe('the API', () => {
  it.each(apiCases)('answers %s in the one error shape', async (...testCase) => {
    const answer = await send(api.url, apiKey, testCase);
    expect(answer.status).toBe(testCase[5]);
    expect(isOneErrorShape(answer, testCase[6])).toBe(true);
    expect(answer.text).not.toContain(apiKey);
    expect(answer.text).not.toContain('FST_');
  });

  it('answers bad JSON with a message of its own, not the parser internals', async () => {
    const answer = await send(api.url, apiKey, apiCases[4] as Case);
    expect(answer.json.error.message).toBe('body: expected JSON');
  });

  it('answers a request that is not HTTP in the one shape', async () => {
    const answer = await garbage(api.url);
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toEqual({
      error: { code: 'bad_request', message: 'the request is not valid HTTP' },
    });
  });

  it("answers Bull Board's refusals and unknown queues in the one shape", async () => {
    const refused = await rawRequest(api.url, 'GET', '/admin/queues/api/queues');
    expect(refused.status).toBe(401);
    expect(isOneErrorShape(refused, 'unauthorized')).toBe(true);
    const operator = { authorization: `Bearer ${operatorKey}` };
    const unknownQueue = await rawRequest(api.url, 'GET', '/admin/queues/api/queues/nope/metrics', {
      headers: operator,
    });
    expect(unknownQueue.status).toBe(404);
    expect(unknownQueue.json.error).toMatchObject({ code: 'not_found', message: expect.any(String) });
    const unknownPath = await rawRequest(api.url, 'GET', '/admin/queues/nothing/here/at/all', {
      headers: operator,
    });
    expect(unknownPath.status).toBe(404);
    expect(isOneErrorShape(unknownPath, 'not_found')).toBe(true);
  });
});

describe('the data plane', () => {
  it.each(dataPlaneCases)('answers %s in the one error shape', async (...testCase) => {
    const answer = await send(worker.url, TEST_TOKEN, testCase);
    expect(answer.status).toBe(testCase[5]);
    expect(answer.json?.error?.code).toBe(testCase[6]);
    expect(typeof answer.json.error.message).toBe('string');
    expect(answer.text).not.toContain(TEST_TOKEN);
    expect(answer.text).not.toContain('FST_');
  });

  it('answers a request that is not HTTP in the one shape', async () => {
    const answer = await garbage(worker.url);
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain('"code":"bad_request"');
  });
});

describe("a run worker's or sweeper's ops server (no credential, nothing protected)", () => {
  it('answers health to anyone and its unknown paths and router errors in the one shape', async () => {
    const app = createOpsServer(silentLogger(), createMetrics().registry, () => []);
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      expect((await rawRequest(url, 'GET', '/healthz')).json).toEqual({ status: 'ok' });
      const missing = await rawRequest(url, 'GET', '/v1/anything');
      expect(missing.status).toBe(404);
      expect(isOneErrorShape(missing, 'not_found')).toBe(true);
      const badUrl = await rawRequest(url, 'GET', '/%ff');
      expect(badUrl.status).toBe(400);
      expect(isOneErrorShape(badUrl, 'bad_request')).toBe(true);
    } finally {
      await app.close();
    }
  });
});

describe('a plugin that phrases its own errors', () => {
  it('has its 4xx and 5xx rewritten to the one shape, keeping its translation key', async () => {
    const app = createHttpServer(silentLogger(), 'test');
    await app.register(async (plugin) => {
      reshapeErrorAnswers(plugin);
      plugin.get('/missing', { config: { door: 'public' } }, async (_request, reply) =>
        reply.code(404).send({ error: { key: 'ERRORS.QUEUE_NOT_FOUND' } }),
      );
      plugin.get('/broken', { config: { door: 'public' } }, async (_request, reply) =>
        reply.code(500).send({ error: 'boom', stack: 'at secret.js:1' }),
      );
    });
    const missing = await app.inject({ method: 'GET', url: '/missing' });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toEqual({
      error: { code: 'not_found', message: 'ERRORS.QUEUE_NOT_FOUND', key: 'ERRORS.QUEUE_NOT_FOUND' },
    });
    const broken = await app.inject({ method: 'GET', url: '/broken' });
    expect(broken.json()).toEqual({ error: { code: 'internal', message: 'internal error' } });
    await app.close();
  });
});

/** Bytes that are not an HTTP request; Node refuses them before any route sees them. */
function garbage(baseUrl: string): Promise<string> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname === 'localhost' ? '127.0.0.1' : hostname);
    const chunks: Buffer[] = [];
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.write('NOT HTTP AT ALL\x00\r\n\r\n');
  });
}
