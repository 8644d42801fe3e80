import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiHandle } from '../../apps/api/server.js';
import type { TranscriptEntry } from '../../libs/runtime/index.js';
import type { RunStore } from '../../libs/store/index.js';
import type { RunTranscripts } from '../../libs/store/run-transcript.js';
import { startTestApi } from '../fixtures/api.js';
import { TEST_TOKEN } from '../fixtures/browser-worker.js';
import { type RigRunSide, startRigRunSide, submitTestRun } from '../fixtures/execute-run.js';
import { ACQUIRE_PATH as ACQUIRE, type LeaseRig } from '../fixtures/lease-rig.js';
import { uniquePrefix } from '../fixtures/redis.js';

/**
 * ADR-0177: "Exhaustion preserves the original stable failure and the workflow's explicit unverified
 * outcome." A run whose acquisition fails three times in a row goes on to its answer — and its run
 * view and the tool call's ledger entry and transcript result say, for good, that it is unverified.
 */
describe('an exhausted acquisition leaves an explicit unverified outcome', () => {
  const prefix = uniquePrefix('chaos-unverified');
  let rig: LeaseRig;
  let side: RigRunSide;
  let store: RunStore;
  let transcripts: RunTranscripts;
  let api: ApiHandle;

  beforeAll(async () => {
    side = await startRigRunSide({
      prefix,
      principal: 'alice',
      profileIds: 'briefing',
      page: '<!doctype html><title>briefing</title><p>Three meetings today</p>',
    });
    ({ rig, store, transcripts } = side);
    api = await startTestApi(prefix);
  });

  afterAll(async () => {
    await api?.close();
    await side?.close();
  });

  /** Submits the briefing of the page at `path` on `profileId` and executes it once, as the run worker would. */
  async function runBriefing(profileId: string, path: string) {
    const submitted = await submitTestRun(store, {
      agent: { model: 'scripted', instructions: 'brief me' },
      browserProfileId: profileId,
      input: {
        text: 'read the briefing',
        script: { steps: [{ tool: 'browser.navigate', url: `${rig.origin}${path}` }], answer: 'briefed' },
      },
    });
    const { end } = await side.execute(submitted);
    return { submitted, end };
  }

  it('marks the run view and the tool call unverified, with the last error, and ends the run with that error', async () => {
    const profileId = await rig.newProfile({ id: 'briefing-exhausted' });
    rig.proxy.inject({ method: 'POST', path: ACQUIRE, action: { kind: 'status', status: 503 }, times: 3 });
    const { submitted, end } = await runBriefing(profileId, '/exhausted');

    // ADR-0177: exhaustion keeps the original stable failure; it is the run's end, at its step.
    expect(end).toEqual({
      kind: 'failed',
      code: 'provider_unavailable',
      detail: expect.any(String),
      step: 1,
    });
    expect(rig.seenFor(ACQUIRE, profileId).map((request) => request.action)).toEqual([
      'status',
      'status',
      'status',
    ]);
    expect(rig.hits.get('/exhausted')).toBeUndefined();

    const invocationId = `${submitted.id}-a1-s1-i0`;
    const view = await store.getRun(submitted.id);
    expect(view).toMatchObject({
      status: 'failed',
      error: { code: 'provider_unavailable', step: 1 },
      unverified: true,
      unverified_error: {
        invocation_id: invocationId,
        code: 'provider_unavailable',
        message: expect.any(String),
      },
    });
    // The original stable failure, on the tool call's ledger entry and in what the model read.
    const [entry] = await store.listInvocations(submitted.id);
    expect(entry).toMatchObject({
      invocation_id: invocationId,
      state: 'completed',
      result: { ok: false, code: 'provider_unavailable', unverified: true },
    });
    const [toolResult] = (await transcripts.load<TranscriptEntry>(submitted.id)).filter(
      (candidate) => candidate.kind === 'tool',
    );
    expect(toolResult).toMatchObject({
      outcome: { ok: false, code: 'provider_unavailable', unverified: true },
    });
    // GET /v1/runs/{id} shows it as the store holds it.
    const { key } = await store.createApiKey({ tenant: 't1', principal: 'alice', scopes: ['runs:read'] });
    const response = await fetch(`${api.url}/v1/runs/${submitted.id}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({
      status: 'failed',
      error: { code: 'provider_unavailable', step: 1 },
      unverified: true,
      unverified_error: { invocation_id: invocationId, code: 'provider_unavailable' },
    });
    // The error names the code, never the service's free text, a URL or a token.
    const said = JSON.stringify(view?.unverified_error);
    for (const secret of [TEST_TOKEN, 'injected', 'http://', '127.0.0.1']) expect(said).not.toContain(secret);
  });

  it('leaves a run whose acquisition recovered without the mark', async () => {
    const profileId = await rig.newProfile({ id: 'briefing-recovered' });
    rig.proxy.inject({ method: 'POST', path: ACQUIRE, action: { kind: 'status', status: 503 }, times: 2 });
    const { submitted } = await runBriefing(profileId, '/recovered');
    expect(rig.hits.get('/recovered')).toBe(1);
    expect(await store.getRun(submitted.id)).toMatchObject({
      status: 'succeeded',
      unverified: false,
      unverified_error: null,
    });
  });
});
