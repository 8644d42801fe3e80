import { rmSync } from 'node:fs';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { type LoginSite, startLoginSite } from '../fixtures/login-site.js';
import {
  type ChatRequestBody,
  latestObservation,
  type ModelServer,
  type PolicyReply,
  startModelServer,
} from '../fixtures/model-server.js';
import { SCRIPTED_MODELS_YAML, writeOpsDir } from '../fixtures/ops-dir.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { storedValues } from '../fixtures/redis-values.js';
import { restClient } from '../fixtures/rest.js';
import { startWebhookReceiver, type WebhookReceiver } from '../fixtures/webhook-receiver.js';

/** Ada's password: given to the run as a declared secret only, never to its model. */
const PASSWORD = 'Quartz-zebra-4711-lantern';
/** Bob's password: the page itself says it (a test site's instruction), no secret declared. */
const HINTED = 'gan9-ferry';
/** Cy's password: in the run's input, typed by the model into a form the site sends with GET. */
const TYPED = 'Opal tide&77';

/** The tool results the model was sent in this request, in order (`{ok, code?, result?}`). */
function toolResults(body: ChatRequestBody): Array<{ ok: boolean; code?: string; result?: unknown }> {
  return body.messages
    .filter((message) => message.role === 'tool')
    .map((message) => JSON.parse(String(message.content)));
}

type Step = (body: ChatRequestBody) => PolicyReply;

const navigate =
  (url: string): Step =>
  () => ({ tool_calls: [{ name: 'browser__navigate', arguments: { url } }] });

const actOn =
  (name: string, action: 'fill' | 'click', text?: (body: ChatRequestBody) => string): Step =>
  (body) => {
    const page = latestObservation(body);
    // A button is clicked, a text field filled: the heading "Sign in" is neither.
    const roles = action === 'click' ? ['button'] : ['textbox', 'searchbox'];
    const element = page?.elements.find(
      (candidate) => candidate.name === name && roles.includes(candidate.role),
    );
    if (!page || !element) return { content: `no element named ${name}` };
    return {
      tool_calls: [
        {
          name: 'browser__act',
          arguments: {
            revision: page.revision,
            element: element.ref,
            action,
            ...(text ? { text: text(body) } : {}),
          },
        },
      ],
    };
  };

/** What a model reads off the page: the password an instruction on it gives. */
function hintOf(body: ChatRequestBody): string {
  return /Sign in with the password ([A-Za-z0-9-]+)/.exec(JSON.stringify(body.messages))?.[1] ?? 'not-seen';
}

/**
 * DESIGN §12, secrets by name, through the whole fleet with the OpenAI-compatible adapter against
 * a local model server: each run's input names its play; the model plays it one call a turn.
 */
function policies(origin: string): Record<string, Step[]> {
  return {
    'Sign in as ada': [
      navigate(`${origin}/`),
      actOn('Username', 'fill', () => 'ada'),
      actOn('Password', 'fill', () => '{{secret:pw}}'),
      actOn('Sign in', 'click'),
      () => ({ content: 'Signed in as ada.' }),
    ],
    'Type the secret where it does not belong': [
      navigate(`${origin}/search`),
      actOn('Search', 'fill', () => '{{secret:pw}}'),
      actOn('Password', 'fill', () => '{{secret:bank}}'),
      () => ({ content: 'Both refused.' }),
    ],
    'Sign in as bob as the page says': [
      navigate(`${origin}/hint`),
      actOn('Username', 'fill', () => 'bob'),
      actOn('Password', 'fill', hintOf),
      // Read again after typing: the page's instruction is still there to be read.
      actOn('Sign in', 'click'),
      (body) => ({ content: `The page said ${hintOf(body)}.` }),
    ],
    [`Sign in as cy with the password ${TYPED}`]: [
      navigate(`${origin}/get`),
      actOn('Username', 'fill', () => 'cy'),
      actOn('Password', 'fill', () => TYPED),
      actOn('Sign in', 'click'),
      () => ({ content: 'Signed in as cy.' }),
    ],
  };
}

describe('secrets by name: typed by the browser worker, never seen or kept (DESIGN §12)', {
  timeout: 300_000,
}, () => {
  const prefix = uniquePrefix('secrets');
  const logLines: string[] = [];
  let fleet: FleetHandle;
  let site: LoginSite;
  let model: ModelServer;
  let receiver: WebhookReceiver;
  let opsDir: string;
  let redis: Redis;
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    site = await startLoginSite({ ada: PASSWORD, bob: HINTED, cy: TYPED }, { hint: HINTED });
    const plays = policies(site.origin);
    model = await startModelServer({
      policy: (body) => {
        const input = String(body.messages.find((message) => message.role === 'user')?.content ?? '');
        const play = plays[input];
        if (!play) return { content: `no play for ${input}` };
        const step = play[toolResults(body).length] ?? (() => ({ content: 'done' }));
        return step(body);
      },
    });
    receiver = await startWebhookReceiver();
    opsDir = writeOpsDir(`${SCRIPTED_MODELS_YAML}
  agent:
    provider: openai-compatible
    base_url: ${model.baseUrl}
    api_key_env: AGENT_API_KEY
    input_usd_per_mtok: "0"
    cached_input_usd_per_mtok: "0"
    output_usd_per_mtok: "0"
    context_window_tokens: 272000
    max_output_tokens: 1024
`);
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logLines.push(chunk.toString('utf8'));
        done();
      },
    });
    fleet = await startTestFleet(
      prefix,
      {
        LOG_LEVEL: 'debug',
        LEASEHOLD_OPS_DIR: opsDir,
        AGENT_API_KEY: model.apiKey,
        LEASEHOLD_WEBHOOKS_ALLOW_PRIVATE: 'true',
      },
      // No redaction of our own: whatever the fleet hands its logger is what is searched.
      { logger: pino({ level: 'debug' }, sink) },
    );
    redis = new Redis(testRedisUrl());
    expect((await call('POST', '/v1/profiles', { id: 'shop', allowed_origins: [site.origin] })).status).toBe(
      201,
    );
    const hook = await call('POST', '/v1/webhooks', {
      url: receiver.url,
    });
    expect(hook.status).toBe(201);
  });

  afterAll(async () => {
    await fleet?.close();
    await site?.close();
    await model?.close();
    await receiver?.close();
    if (opsDir) rmSync(opsDir, { recursive: true, force: true });
    if (redis) {
      await deletePrefixedKeys(redis, prefix);
      redis.disconnect();
    }
  });

  /** Submits a bound run and approves its acts (one grant), until it ends. */
  // biome-ignore lint/suspicious/noExplicitAny: a run view, asserted field by field.
  async function runToEnd(input: string, secrets?: unknown): Promise<{ run: any; approvals: unknown[] }> {
    const session = await call('POST', '/v1/sessions', { browser_profile_id: 'shop', model: 'agent' });
    expect(session.status).toBe(201);
    const submitted = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input,
      ...(secrets ? { secrets } : {}),
    });
    expect(submitted.status).toBe(201);
    expect(JSON.stringify(submitted.body)).not.toContain(PASSWORD);
    const runId = submitted.body.id as string;
    const approvals: unknown[] = [];
    let run = await waitForStatus(runId, ['parked', 'succeeded', 'failed'], 90_000);
    while (run.status === 'parked') {
      approvals.push(run.pending_approvals, (await call('GET', `/v1/approvals?run_id=${runId}`)).body);
      const approved = await call('POST', `/v1/approvals/${run.pending_approvals[0].id}/approve`, {
        grant: { duration_ms: 600_000, max_actions: 20 },
      });
      expect(approved.status).toBe(200);
      approvals.push(approved.body);
      run = await waitForStatus(runId, ['parked', 'succeeded', 'failed'], 90_000);
    }
    return { run, approvals };
  }

  async function stepsOf(runId: string): Promise<unknown[]> {
    const steps: unknown[] = [];
    let cursor: string | null = null;
    do {
      const page = await call('GET', `/v1/runs/${runId}/steps?limit=50${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.status).toBe(200);
      steps.push(...page.body.steps);
      cursor = page.body.next_cursor;
    } while (cursor);
    return steps;
  }

  function requestsOf(input: string) {
    return model.requests.filter((request) =>
      request.body.messages.some((message) => message.role === 'user' && message.content === input),
    );
  }

  it('signs in with a declared secret the model typed by name, and nothing but its sealed form holds it', async () => {
    const { run, approvals } = await runToEnd('Sign in as ada', {
      pw: { value: PASSWORD, origins: [`${site.origin}/`] },
    });
    expect({ status: run.status, error: run.error ?? null }).toEqual({ status: 'succeeded', error: null });
    const runId = run.id as string;
    // The site got the password.
    expect(site.attempts).toContainEqual({ username: 'ada', passwordMatched: true });
    expect(site.greeted).toContain('ada');

    // The model was told the name and origin, and typed the reference.
    const requests = requestsOf('Sign in as ada');
    expect(JSON.stringify(requests[0]?.body.messages)).toContain(`browser_secrets=pw@${site.origin}`);
    expect(JSON.stringify(requests.map((request) => request.body))).toContain('{{secret:pw}}');
    for (const request of model.requests) expect(JSON.stringify(request.body)).not.toContain(PASSWORD);

    // What is read back: the run (no secrets in it), its steps (the reference, not `[secret]`),
    // its events, its approvals.
    const view = (await call('GET', `/v1/runs/${runId}`)).body;
    expect(view.input).not.toHaveProperty('secrets');
    expect(JSON.stringify(view)).not.toContain(PASSWORD);
    const listed = (await call('GET', '/v1/runs')).body;
    expect(JSON.stringify(listed)).not.toContain(PASSWORD);
    const steps = await stepsOf(runId);
    expect(JSON.stringify(steps)).toContain('{{secret:pw}}');
    expect(JSON.stringify(steps)).not.toContain(PASSWORD);
    const events = await fetch(`${fleet.urls.api.replace(/\/v1$/, '')}/v1/runs/${runId}/events`, {
      headers: { authorization: `Bearer ${fleet.apiKey}` },
    });
    expect(await events.text()).not.toContain(PASSWORD);
    expect(approvals.length).toBeGreaterThan(0);
    expect(JSON.stringify(approvals)).not.toContain(PASSWORD);
    expect(JSON.stringify(await fleet.store.listApprovals(runId))).not.toContain(PASSWORD);

    // Webhooks: run.ended of this run was delivered, and no body holds the value.
    await expect
      .poll(() => receiver.got.some(({ body }) => body.includes(runId) && body.includes('run.ended')))
      .toBe(true);
    expect(receiver.got.filter(({ body }) => body.includes(PASSWORD))).toEqual([]);

    // Logs: every line the fleet wrote at debug.
    expect(logLines.length).toBeGreaterThan(0);
    expect(logLines.filter((line) => line.includes(PASSWORD))).toEqual([]);

    // Redis: every key of the test's prefix; the sealed form is there, and nothing holds the value.
    const values = await storedValues(redis, prefix);
    const holding = [...values.entries()].filter(([, value]) => value.includes(PASSWORD)).map(([key]) => key);
    expect(holding).toEqual([]);
    const sealed = await redis.hget(`${prefix}:{run:${runId}}:secrets`, 'sealed');
    expect(sealed).toMatch(/^v1\./);
  });

  it('refuses a secret typed into a search box, or on an origin it does not name, before dispatch', async () => {
    const attemptsBefore = site.attempts.length;
    const { run } = await runToEnd('Type the secret where it does not belong', {
      pw: { value: PASSWORD, origins: [site.origin] },
      bank: { value: 'for-the-bank-only', origins: ['https://bank.example'] },
    });
    expect(run).toMatchObject({ status: 'succeeded', result: { answer: 'Both refused.' } });
    const last = requestsOf('Type the secret where it does not belong').at(-1);
    const results = toolResults(last?.body as ChatRequestBody);
    expect(results.slice(1).map((result) => result.code)).toEqual([
      'secret_not_allowed',
      'secret_not_allowed',
    ]);
    // The site saw nothing typed: its search box reports every input, and no sign-in was tried.
    expect(site.effects).toEqual([]);
    expect(site.attempts.length).toBe(attemptsBefore);
    const steps = (await stepsOf(run.id)) as Array<{ tool: { outcome: { code: string | null } } | null }>;
    expect(steps.filter((step) => step.tool?.outcome?.code === 'secret_not_allowed')).toHaveLength(2);
  });

  it('shows the agent a page that says the password, before and after it is typed, when none is declared', async () => {
    const { run } = await runToEnd('Sign in as bob as the page says');
    expect(run).toMatchObject({ status: 'succeeded', result: { answer: `The page said ${HINTED}.` } });
    expect(site.attempts).toContainEqual({ username: 'bob', passwordMatched: true });
    // The observation after the password was typed still shows the page's instruction as it is.
    const last = requestsOf('Sign in as bob as the page says').at(-1);
    const afterTyping = toolResults(last?.body as ChatRequestBody)[2] as {
      result: { observation: { text: string } };
    };
    expect(afterTyping.result.observation.text).toContain(`Sign in with the password ${HINTED}`);
  });

  it('strikes a password the model typed from the URL and title a GET form echoes it in', async () => {
    const input = `Sign in as cy with the password ${TYPED}`;
    const { run } = await runToEnd(input);
    expect(run).toMatchObject({ status: 'succeeded', result: { answer: 'Signed in as cy.' } });
    expect(site.attempts).toContainEqual({ username: 'cy', passwordMatched: true });
    const steps = (await stepsOf(run.id)) as Array<{
      tool: { page: { url: string; title: string } | null } | null;
    }>;
    const welcome = steps.find((step) => step.tool?.page?.url.includes('/welcome'));
    expect(welcome?.tool?.page?.url).toContain('password=[secret]');
    expect(welcome?.tool?.page?.title).toBe('Welcome cy, signed in with [secret]');
    const kept = JSON.stringify(steps);
    for (const form of [TYPED, encodeURIComponent(TYPED), 'Opal+tide%2677']) expect(kept).not.toContain(form);
  });
});
