import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ScriptedModel } from '../../libs/models/index.js';
import { type AcquireAttemptDiagnostic, SINGLE_ACQUIRE_ATTEMPT } from '../../libs/provider/index.js';
import {
  BrowserToolExecutor,
  type Invocation,
  type InvocationState,
  type RunPort,
  runExecution,
  type ToolOutcome,
  type TranscriptEntry,
} from '../../libs/runtime/index.js';
import type { RunStore } from '../../libs/store/index.js';
import type { RunTranscripts } from '../../libs/store/run-transcript.js';
import { type RigRunSide, startRigRunSide, submitTestRun } from '../fixtures/execute-run.js';
import { ACQUIRE_PATH as ACQUIRE, type LeaseRig, rigProfile } from '../fixtures/lease-rig.js';
import { TEST_LOOP_LIMITS } from '../fixtures/memory-run.js';
import { uniquePrefix } from '../fixtures/redis.js';

/** A run port held in memory: the loop as `executeRun` drives it, without the store. */
class MemoryRunPort implements RunPort {
  readonly transcript: TranscriptEntry[];
  readonly #usage = { steps: 0, modelCalls: 0, toolCalls: 0 };
  readonly #ledger = new Map<string, InvocationState>();

  constructor(
    readonly runId: string,
    input: string,
  ) {
    this.transcript = [{ kind: 'input', text: input }];
  }

  invocationId(step: number, index: number): string {
    return `${this.runId}-a1-s${step}-i${index}`;
  }
  async loadTranscript() {
    return [...this.transcript];
  }
  async appendTranscript(entry: TranscriptEntry) {
    this.transcript.push(entry);
  }
  async usage() {
    return { ...this.#usage };
  }
  async recordModelCall() {
    this.#usage.steps += 1;
    this.#usage.modelCalls += 1;
  }
  async cancelRequested() {
    return false;
  }
  async startInvocation(invocation: Invocation): Promise<InvocationState> {
    const known = this.#ledger.get(invocation.id);
    if (known) return known;
    this.#usage.toolCalls += 1;
    this.#ledger.set(invocation.id, { state: 'started' });
    return { state: 'new' };
  }
  async markDispatched(invocation: Invocation) {
    this.#ledger.set(invocation.id, { state: 'dispatched' });
  }
  async completeInvocation(invocation: Invocation, outcome: ToolOutcome) {
    this.#ledger.set(invocation.id, { state: 'completed', outcome });
  }
}

/**
 * ADR-0177's verification through a whole run: the scheduled briefing stopping on one transient
 * acquisition failure without the recovery policy, and passing with the production composition
 * (`executeRun`, which installs it), through a fault proxy between the run side and a real lease
 * service (real Chromium, real Redis).
 */
describe('a whole run meets a transient acquisition failure', () => {
  const prefix = uniquePrefix('chaos-acquire-run');
  let rig: LeaseRig;
  let side: RigRunSide;
  let store: RunStore;
  let transcripts: RunTranscripts;

  beforeAll(async () => {
    side = await startRigRunSide({
      prefix,
      principal: 'alice',
      profileIds: 'briefing',
      page: '<!doctype html><title>briefing</title><p>Three meetings today</p>',
    });
    ({ rig, store, transcripts } = side);
  });

  afterEach(() => rig.proxy.clearFaults());

  afterAll(async () => {
    await side?.close();
  });

  function briefing(path: string) {
    return {
      text: 'read the briefing',
      script: { steps: [{ tool: 'browser.navigate', url: `${rig.origin}${path}` }], answer: 'briefed' },
    };
  }

  function acquiresOf(profileId: string) {
    return rig.seenFor(ACQUIRE, profileId);
  }

  function toolOutcomes(transcript: readonly TranscriptEntry[]) {
    return transcript.flatMap((entry) =>
      entry.kind === 'tool' ? [{ name: entry.name, outcome: entry.outcome }] : [],
    );
  }

  it('without the recovery policy, the briefing stops: its navigate fails provider_unavailable', async () => {
    const profileId = await rig.newProfile({ id: 'briefing-single' });
    rig.proxy.inject({ method: 'POST', path: ACQUIRE, action: { kind: 'status', status: 503 } });
    const runId = 'run_single_attempt';
    const diagnostics: AcquireAttemptDiagnostic[] = [];
    // executeRun's composition, with the single attempt an independently built provider may keep.
    const provider = rig.provider(profileId, runId, {
      acquireRetry: SINGLE_ACQUIRE_ATTEMPT,
      onAcquireAttempt: (diagnostic) => {
        diagnostics.push(diagnostic);
      },
    });
    const deadlineMs = Date.now() + 60_000;
    const port = new MemoryRunPort(runId, 'read the briefing');
    const input = briefing('/single');
    const end = await runExecution({
      run: port,
      model: new ScriptedModel(input.script as ConstructorParameters<typeof ScriptedModel>[0]),
      tools: new BrowserToolExecutor(provider, deadlineMs),
      policy: { needsApproval: async () => false, park: async () => 'never' },
      limits: TEST_LOOP_LIMITS,
      deadlineMs,
      signal: new AbortController().signal,
    });
    await provider.close({ seal: true });

    expect(toolOutcomes(port.transcript)).toEqual([
      {
        name: 'browser.navigate',
        outcome: { ok: false, code: 'provider_unavailable', message: expect.any(String) },
      },
    ]);
    // The run ends with the navigate's own code at its step, not a success.
    expect(end).toMatchObject({ kind: 'failed', code: 'provider_unavailable', step: 1 });
    expect(rig.hits.get('/single')).toBeUndefined();
    expect(acquiresOf(profileId).map((request) => request.action)).toEqual(['status']);
    expect(diagnostics).toMatchObject([{ attempt: 1, code: 'provider_unavailable', next: 'stop' }]);
  });

  it('with the policy executeRun installs, the briefing reads its page, and one content-free diagnostic is on its events', async () => {
    const profileId = await rig.newProfile({ id: 'briefing-bounded' });
    rig.proxy.inject({ method: 'POST', path: ACQUIRE, action: { kind: 'status', status: 503 } });
    const submitted = await submitTestRun(store, {
      agent: { model: 'scripted', instructions: 'brief me' },
      browserProfileId: profileId,
      input: briefing('/bounded'),
    });
    const { end } = await side.execute(submitted);

    expect(end).toEqual({ kind: 'succeeded', answer: 'briefed' });
    expect((await store.getRun(submitted.id))?.status).toBe('succeeded');
    const [navigate] = toolOutcomes(await transcripts.load<TranscriptEntry>(submitted.id));
    expect(navigate).toMatchObject({ name: 'browser.navigate', outcome: { ok: true } });
    expect(rig.hits.get('/bounded')).toBe(1);
    expect(acquiresOf(profileId).map((request) => request.action)).toEqual(['status', 'pass']);

    const attempts = (await store.readEvents(submitted.id)).filter(
      (event) => event.type === 'tool.acquire_attempt',
    );
    expect(attempts).toHaveLength(1);
    expect(attempts[0]?.data).toMatchObject({
      invocation_id: `${submitted.id}-a1-s1-i0`,
      attempt: 1,
      max_attempts: 3,
      outcome: 'failed',
      code: 'provider_unavailable',
      http_status: 503,
      next: 'retry',
    });
    // Content-free: fixed fields of codes and numbers; no URL, no page text, no message from the service.
    expect(Object.keys(attempts[0]?.data ?? {}).sort()).toEqual(
      [
        'invocation_id',
        'attempt',
        'max_attempts',
        'outcome',
        'code',
        'retryable',
        'transport',
        'http_status',
        'service_code',
        'elapsed_ms',
        'next',
        'delay_ms',
        'stop_reason',
      ].sort(),
    );
    const said = JSON.stringify(attempts[0]?.data);
    for (const content of ['http://', '127.0.0.1', 'briefing', 'Three meetings', 'injected'])
      expect(said).not.toContain(content);
    // The run ended done with its page: its lease is sealed and closed.
    const lease = JSON.parse(acquiresOf(profileId)[1]?.upstreamBody?.toString() ?? '{}') as {
      lease_id: string;
    };
    expect(await rig.admin.getLease(rigProfile(profileId), lease.lease_id)).toMatchObject({
      state: 'closed',
      sealed: true,
    });
  });
});
