import http from 'node:http';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { startTestFleet } from '../fixtures/fleet.js';
import {
  deeplyNested,
  isErrorShape,
  type Random,
  type RawRequest,
  type Route,
  routesOf,
  seededRandom,
  sendRaw,
} from '../fixtures/fuzz.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { storedValues } from '../fixtures/redis-values.js';
import { restClient } from '../fixtures/rest.js';

/**
 * A seeded fuzz of both HTTP servers: at least 10,000 malformed requests across every
 * route the API and the browser worker's data plane serve — bad types, missing fields, huge and
 * deeply nested JSON, bad encodings, odd paths and headers — sent authenticated, with the rate
 * limits raised. Nothing may answer 5xx, hang, write a record, or leave the one error shape.
 */

const SEED = 0x1ea5e;
const REQUESTS = 10_500;
const CONCURRENCY = 16;

/**
 * Pages for browsers, not JSON routes: their errors may be HTML: the runs pages and
 * their sign-in form (a refused key answers the form again, 401, for a person to read).
 */
const NON_JSON_ROUTE = /^\/(docs|admin\/queues|signin|signout|runs|ui)(\/|$)/;

interface Target {
  server: 'api' | 'data-plane';
  base: URL;
  auth: string;
  route: Route;
}

type ParamKind = 'real' | 'absent' | 'malformed';

const MALFORMED_SEGMENTS = [
  '',
  '..',
  '%2e%2e',
  'a'.repeat(300),
  '%00',
  '%ff',
  '%c3%28',
  '%3Cscript%3E',
  'x%20y',
  '%F0%9F%92%A5',
  'null',
  '-1',
  '%2F..%2F..%2Fetc',
  'lse_',
  'run_%0d%0aX-Injected:%201',
];

/** Bodies no route can parse: they never reach a handler, so they are safe on real records. */
function unparseableBody(random: Random): { body: Buffer | string; type: string } {
  switch (random.int(6)) {
    case 0:
      return { body: '{"input": "x", ', type: 'application/json' };
    case 1:
      return {
        body: Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
        type: 'application/json',
      };
    case 2:
      return { body: '<run><input>x</input></run>', type: 'application/xml' };
    case 3:
      return { body: `{"input":"${'x'.repeat(70 * 1024)}"}`, type: 'application/json' };
    case 4:
      return { body: '', type: 'application/json' };
    default:
      return { body: `{"a":1}${'\u0000'}`, type: 'application/json' };
  }
}

/** Parseable JSON that no route's schema accepts: wrong types, deep nesting, oversized fields. */
function invalidBody(random: Random): string {
  const deep = () => JSON.parse(deeplyNested(40 + random.int(60), random.pick(['array', 'object'] as const)));
  switch (random.int(9)) {
    case 0:
      return random.pick(['1', '"text"', 'null', 'true', '[]', '[{}]', '-0.5', '1e400']);
    case 1:
      return deeplyNested(2_000 + random.int(6_000), 'array');
    case 2:
      return deeplyNested(2_000 + random.int(6_000), 'object');
    case 3:
      return JSON.stringify({
        input: random.pick([7, [], {}, null, true]),
        model: random.pick([7, [], {}]),
        instructions: random.pick([7, [], {}]),
        allowed_origins: random.pick(['x', 7, [7], [{}], ['javascript:alert(1)']]),
        principal: random.pick([7, {}, '']),
        scopes: random.pick(['admin', 7, [7], ['root']]),
        id: random.pick([7, {}, '../x']),
        requested_expires_at_ms: random.pick(['soon', -1, 1.5]),
        seal: random.pick(['yes', 1]),
        deadline_ms: random.pick(['x', -5]),
        url: random.pick([7, 'file:///etc/passwd']),
        grant: random.pick([7, 'all']),
        reason: random.pick([7, {}]),
        metadata: deep(),
        script: deep(),
      });
    case 4:
      return JSON.stringify({ metadata: deep(), script: deep(), input: deep(), args: deep(), __fuzz: true });
    case 5:
      return JSON.stringify({ input: 'x'.repeat(60_000), instructions: 7, __fuzz: random.chars(8) });
    case 6:
      return '{"__proto__": {"admin": true}, "constructor": {"prototype": {"x": 1}}, "__fuzz": 1}';
    case 7:
      return JSON.stringify({ [random.chars(400)]: random.chars(10), __fuzz: [1, 2, 3] });
    default:
      return JSON.stringify({ __fuzz: '\ud800', input: '\udfff', model: 5 });
  }
}

function oddQuery(random: Random): string {
  return random.pick([
    '',
    '?after=garbage',
    '?after=1-1-1',
    '?run_id=%ff',
    '?run_id=../../x',
    '?tenant=%00',
    '?tenant=../other',
    '?a[b][c]=1&a=2',
    `?x=${'y'.repeat(8_000)}`,
    '?status=zzz&limit=-1&cursor=%%%',
    '?after=99999999999999-0',
  ]);
}

const MCP_SESSION_IDS = [
  '9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d',
  'x'.repeat(300),
  'not-a-uuid',
  '%00',
  '../../mcp',
];

function oddHeaders(random: Random): Record<string, string> {
  return random.pick<Record<string, string>>([
    {},
    { 'idempotency-key': 'k'.repeat(300) },
    { 'idempotency-key': 'has space' },
    { 'idempotency-key': '%F0%9F%92%A5' },
    { 'last-event-id': 'garbage' },
    { 'last-event-id': '1-1-1' },
    { accept: 'text/event-stream' },
    { 'x-forwarded-for': '10.0.0.1, 1.1.1.1' },
    { 'accept-encoding': 'gzip, br' },
    { 'transfer-encoding-x': 'chunked' },
  ]);
}

/** The request target for `route` with each parameter a real, absent or malformed value. */
function targetFor(
  route: Route,
  kind: ParamKind,
  real: (segment: string) => string | undefined,
  random: Random,
): string {
  const segments = route.path.split('/');
  return segments
    .map((segment, index) => {
      if (segment === '*') return random.pick(['', 'static/index.html', 'json', random.chars(6)]);
      if (!segment.startsWith(':')) return segment;
      const before = segments[index - 1] ?? '';
      const known = real(before);
      if (kind === 'real' && known) return known;
      if (kind === 'malformed' || !known) return random.pick(MALFORMED_SEGMENTS);
      return `${known.slice(0, Math.max(1, known.length - 8))}${random.chars(8)}`;
    })
    .join('/');
}

function spellingOf(target: string, random: Random): string {
  switch (random.int(8)) {
    case 0:
      return target.replace('/v1/', '/%761/');
    case 1:
      return `http://fuzz.invalid${target}`;
    case 2:
      return target.replaceAll('/', '//');
    case 3:
      return target.toUpperCase();
    case 4:
      return `${target}/`;
    case 5:
      return `${target}/${random.chars(6)}`;
    case 6:
      return `/${random.chars(5)}${target}`;
    default:
      return target.replace('/v1/', '/v1/./');
  }
}

interface RouteTally {
  sent: number;
  /** Routed and authenticated: the request reached the route's own checks. */
  reached: number;
  /** Refused by the route's schema (422 validation_failed). */
  refusedBySchema: number;
}

describe('a seeded fuzz of both servers', () => {
  let fleet: FleetHandle;
  let redis: Redis;
  let prefix: string;
  const { call } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  const real = new Map<string, string>();

  beforeAll(async () => {
    prefix = uniquePrefix('fuzz');
    fleet = await startTestFleet(prefix, {
      API_RATE_PER_SECOND: '1000000',
      API_RATE_BURST: '1000000',
      AUTH_FAILURES_PER_MINUTE: '1000000',
      EVENT_STREAMS_PER_KEY: '1000000',
    });
    redis = new Redis(testRedisUrl());
    const profile = await call('POST', '/v1/profiles', {
      id: 'shop',
      allowed_origins: ['http://127.0.0.1:9'],
    });
    expect(profile.status).toBe(201);
    const agent = await call('POST', '/v1/agents', { model: 'scripted', instructions: 'Answer.' });
    expect(agent.status).toBe(201);
    const session = await call('POST', '/v1/sessions', { agent_id: agent.body.id });
    expect(session.status).toBe(201);
    const run = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input: 'answer',
      script: { steps: [], answer: 'done' },
    });
    expect(run.status).toBe(201);
    const keys = await call('GET', '/v1/api-keys');
    real.set('runs', run.body.id);
    real.set('sessions', session.body.id);
    real.set('agents', agent.body.id);
    real.set('api-keys', keys.body.api_keys[0].id);
    real.set('profiles', 'shop');
    real.set('tenants', 'dev');
    real.set('leases', 'lse_fuzzNotALease01');
    real.set('approvals', 'apr_fuzzNotAnApproval');
    // The run's record ends (its settle script) before BullMQ files its job as completed: wait for
    // both, or the queue's own write lands inside the fuzz (CI, under load, counted it).
    const deadline = Date.now() + 20_000;
    const settled = async () =>
      (await call('GET', `/v1/runs/${run.body.id}`)).body.ended_at_ms !== null &&
      (await redis.zcard(`${prefix}:runs:completed`)) === 1 &&
      (await redis.llen(`${prefix}:runs:active`)) === 0;
    while (!(await settled())) {
      if (Date.now() > deadline) throw new Error('the set-up run did not end');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });

  afterAll(async () => {
    await fleet?.close();
    if (redis) {
      await deletePrefixedKeys(redis, prefix);
      redis.disconnect();
    }
  });

  /** Every record under the fleet's prefix but the ephemeral ones, as its content per key. */
  async function records(): Promise<Map<string, string>> {
    const values = await storedValues(redis, `${prefix}:`);
    return new Map([...values].filter(([key]) => !EPHEMERAL.test(key)));
  }

  it('answers 10,000 malformed requests with no 5xx, no hang, no record written and one error shape', async () => {
    const random = seededRandom(SEED);
    const targets: Target[] = [
      ...routesOf(fleet.roles.api.app).map((route) => ({
        server: 'api' as const,
        base: new URL(fleet.urls.api),
        // The dashboard takes the fleet operator key alone; every other route a tenant key.
        auth: `Bearer ${route.path.startsWith('/admin/queues') ? fleet.operatorKey : fleet.apiKey}`,
        route,
      })),
      ...routesOf(fleet.roles.browserWorker.app).map((route) => ({
        server: 'data-plane' as const,
        base: new URL(fleet.urls.browserWorker),
        auth: `Bearer ${fleet.config.secrets.dataPlaneToken}`,
        route,
      })),
    ];
    expect(targets.length).toBeGreaterThan(20);
    const before = await records();

    const tallies = new Map<string, RouteTally>();
    const failures: string[] = [];
    let sent = 0;
    let fiveHundreds = 0;
    let shapeMisses = 0;
    const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });

    const requestFor = (target: Target): { request: RawRequest; routed: boolean } => {
      const { route } = target;
      const writes = route.method !== 'GET';
      // A real record is only ever sent a body no route can parse, so nothing can change it.
      const kind: ParamKind = random.pick(['real', 'absent', 'malformed'] as const);
      const safeReal = kind === 'real' && writes ? 'real-unparseable' : kind;
      let path = targetFor(route, kind, (segment) => real.get(segment), random);
      const odd = random.int(10) === 0;
      if (odd) path = spellingOf(path, random);
      const headers: Record<string, string> = { authorization: target.auth, ...oddHeaders(random) };
      // An MCP request past its initialize names its session: without one the route refuses it at
      // once (400), so half carry a session id this server never opened, or a malformed one.
      if (route.path.startsWith('/mcp') && random.int(2) === 0)
        headers['mcp-session-id'] = random.pick(MCP_SESSION_IDS);
      let body: Buffer | string | undefined;
      if (writes) {
        const hasParams = route.path.includes(':');
        if (safeReal === 'real-unparseable' || (!hasParams && route.method === 'DELETE')) {
          const unparseable = unparseableBody(random);
          body = unparseable.body;
          headers['content-type'] = unparseable.type;
        } else if (!hasParams || random.int(4) !== 0) {
          body = invalidBody(random);
          headers['content-type'] = 'application/json';
        } else {
          const unparseable = unparseableBody(random);
          body = unparseable.body;
          headers['content-type'] = unparseable.type;
        }
      }
      return {
        request: {
          method: random.int(40) === 0 ? 'PATCH' : route.method,
          target: path + (route.method === 'GET' ? oddQuery(random) : ''),
          headers,
          ...(body !== undefined ? { body } : {}),
        },
        routed: !odd,
      };
    };

    const started = Date.now();
    const worker = async () => {
      while (sent < REQUESTS) {
        sent += 1;
        const target = random.pick(targets);
        const label = `${target.server} ${target.route.method} ${target.route.path}`;
        const tally = tallies.get(label) ?? { sent: 0, reached: 0, refusedBySchema: 0 };
        tallies.set(label, tally);
        const { request, routed } = requestFor(target);
        let answer: Awaited<ReturnType<typeof sendRaw>>;
        try {
          answer = await sendRaw(agent, target.base, request);
        } catch (error) {
          failures.push(`${request.method} ${request.target.slice(0, 120)}: ${(error as Error).message}`);
          continue;
        }
        if (routed) {
          tally.sent += 1;
          // Past routing and authentication: anything but a refusal at the door or the router's 404.
          const unrouted = answer.status === 404 && answer.body.includes('"no route ');
          if (![400, 401, 414, 429].includes(answer.status) && !unrouted) tally.reached += 1;
          if (answer.status === 422 && answer.body.includes('"validation_failed"'))
            tally.refusedBySchema += 1;
        }
        if (answer.status >= 500) {
          fiveHundreds += 1;
          failures.push(
            `${answer.status} ${request.method} ${request.target.slice(0, 120)} → ${answer.body.slice(0, 160)}`,
          );
        }
        const jsonRoute = !NON_JSON_ROUTE.test(target.route.path);
        if (answer.status >= 400 && jsonRoute && !isErrorShape(answer.body)) {
          shapeMisses += 1;
          failures.push(
            `shape ${answer.status} ${request.method} ${request.target.slice(0, 120)} → ${answer.body.slice(0, 160)}`,
          );
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    agent.destroy();
    const elapsedMs = Date.now() - started;

    const after = await records();
    const written = [...after.entries()]
      .filter(([key, digest]) => before.get(key) !== digest)
      // Named with what it held before and after, so a failure says what wrote it.
      .map(
        ([key, digest]) => `${key}: ${(before.get(key) ?? 'absent').slice(0, 200)} → ${digest.slice(0, 200)}`,
      );
    const report = [...tallies.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(
        ([label, tally]) =>
          `${label}: sent ${tally.sent}, reached ${tally.reached}, refused by schema ${tally.refusedBySchema}`,
      );
    console.log(
      [
        `fuzz: ${sent} requests (seed ${SEED}) in ${elapsedMs} ms; 5xx ${fiveHundreds}; error-shape misses ${shapeMisses}; records written ${written.length} ${written.join(' ')}`,
        ...report,
      ].join('\n'),
    );

    expect(failures.slice(0, 20)).toEqual([]);
    expect(fiveHundreds).toBe(0);
    expect(shapeMisses).toBe(0);
    expect(written).toEqual([]);
    expect(sent).toBeGreaterThanOrEqual(10_000);
    // Every route saw requests reach its own checks past routing and authentication.
    const unreached = [...tallies.entries()]
      .filter(([, tally]) => tally.reached === 0)
      .map(([label]) => label);
    expect(unreached).toEqual([]);
  }, 180_000);
});

/**
 * Keys that change by design while requests arrive: the browser and run workers' heartbeats, the per-key
 * rate-limit window, and the failed-authentication count of the sign-in form, whose body
 * carries the key: a fuzzed body is a wrong key, counted against the address as at every door.
 */
// BullMQ's own stall-check timestamp of each queue (runs, and earlier webhooks) is rewritten
// by the workers every 30 s on their own clock, not by requests: a fuzz that ran past 30 s saw it.
const EPHEMERAL =
  /:(\{browser-workers\}:[^:]+|\{run-workers\}:[^:]+|rate-limit:[^:]+|[a-z-]+:stalled-check|auth-failures:[^:]+)$/;
