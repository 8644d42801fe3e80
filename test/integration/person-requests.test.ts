import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunView } from '../../libs/contracts/index.js';
import { RunStore } from '../../libs/store/index.js';
import type { Metrics } from '../../libs/telemetry/index.js';
import { eventually } from '../fixtures/eventually.js';
import { ran, TEST_RUN_LIMITS } from '../fixtures/run-store.js';
import { type SweptStore, startSweptStore } from '../fixtures/sweeper.js';

const TENANT = 'acme';
const poll = <T>(read: () => Promise<T>, done: (value: T) => boolean) => eventually(read, done, 5_000, 25);

/** A sample's value in the registry, or 0. */
async function sampled(metrics: Metrics, name: string, labels: Record<string, string>): Promise<number> {
  const metric = metrics.registry.getSingleMetric(name);
  const values = (await metric?.get())?.values ?? [];
  const found = values.find((value) =>
    Object.entries(labels).every(([label, wanted]) => value.labels[label] === wanted),
  );
  return found?.value ?? 0;
}

/**
 * A run's request for a person and a person's takeover, in Redis and at the sweeper: who may take
 * a page over, one person at a time, a request nobody answers failing the run `person_timeout`,
 * and a takeover past its time handed back.
 */
describe('a person on the page: requests, takeovers and their time', () => {
  let swept: SweptStore;
  let store: RunStore;
  let metrics: Metrics;
  let sessionId: string;

  beforeAll(async () => {
    swept = await startSweptStore('person-requests', TENANT);
    ({ store, metrics, sessionId } = swept);
  });
  afterAll(async () => {
    await swept?.close();
  });

  async function parkedOnPerson(expiresInMs: number): Promise<{ run: RunView; approvalId: string }> {
    const { run } = await store.submitRun({
      tenant: TENANT,
      principal: 'alice',
      sessionId,
      input: null,
      limits: TEST_RUN_LIMITS,
      timeoutMs: 600_000,
    });
    ran(await store.claimRun(run.id, 1, 'w1'));
    const { approvalId, transition } = await store.requestApproval(run.id, 'w1', {
      invocationId: `${run.id}-a1-s2-i0`,
      tool: 'browser.request_person',
      arguments: { reason: 'Sign in, then hand back' },
      person: { reason: 'Sign in, then hand back', expires_at_ms: Date.now() + expiresInMs },
    });
    expect(transition.ok && transition.detail).toBe('parked');
    return { run, approvalId };
  }

  const takeOver = (runId: string, principal: string, untilMs: number, tenant = TENANT) =>
    store.takeOverRun(runId, {
      tenant,
      principal,
      holder: `principal:${principal}`,
      untilMs,
      reason: 'taken over by its principal',
    });

  it('fails a run nobody took over by its request’s expiry person_timeout, and counts it', async () => {
    const { run, approvalId } = await parkedOnPerson(200);
    const failed = await poll(
      () => store.getRun(run.id),
      (current) => current?.status === 'failed',
    );
    expect(failed?.error).toMatchObject({ code: 'person_timeout' });
    expect((await store.getApproval(TENANT, approvalId))?.status).toBe('expired');
    expect(await sampled(metrics, 'leasehold_person_requests_total', { outcome: 'timeout' })).toBe(1);
  });

  it('tells a renewal from a new hold by its holder, even within the millisecond of the take', async () => {
    const { run } = await parkedOnPerson(600_000);
    // The same clock reading for both calls: a fast renewal comes in the take's own millisecond.
    const frozenMs = Date.now();
    const frozen = new RunStore(swept.redis, `${swept.prefix}:`, { clock: () => frozenMs });
    const take = () =>
      frozen.takeOverRun(run.id, {
        tenant: TENANT,
        principal: 'alice',
        holder: 'principal:alice',
        untilMs: frozenMs + 600_000,
        reason: 'taken over by its principal',
      });
    expect(await take()).toMatchObject({ ok: true, state: 'held', fresh: true });
    expect(await take()).toMatchObject({ ok: true, state: 'held', fresh: false });
    const taken = (await store.readEvents(run.id)).filter((event) => event.type === 'person.taken_over');
    expect(taken).toHaveLength(1);
  });

  it('lets the run’s principal alone take its page over, one person at a time', async () => {
    const { run, approvalId } = await parkedOnPerson(600_000);
    const until = Date.now() + 600_000;
    expect(await takeOver(run.id, 'alice', until, 'other-tenant')).toEqual({
      ok: false,
      code: 'not_found',
      detail: '',
    });
    expect(await takeOver(run.id, 'eve', until)).toEqual({ ok: false, code: 'not_principal', detail: '' });
    const held = await takeOver(run.id, 'alice', until);
    expect(held).toMatchObject({ ok: true, state: 'held', approvalId, created: false, fresh: true });
    // The same holder renews; anyone else hears who holds it.
    expect(await takeOver(run.id, 'alice', until + 1_000)).toMatchObject({ state: 'held', fresh: false });
    expect(await takeOver(run.id, 'eve', until)).toEqual({
      ok: false,
      code: 'person_in_control',
      detail: 'principal:alice',
    });
    // Nobody decides the held request but its holder's hand-back.
    expect(await store.approve(TENANT, approvalId, 'alice')).toMatchObject({
      ok: false,
      code: 'person_in_control',
    });
    const back = await store.handBack(TENANT, approvalId, 'alice', {
      holder: 'principal:alice',
      account: { ended_at_ms: Date.now(), inputs: 4, end_url: 'https://shop.example/account' },
    });
    expect(back).toMatchObject({ ok: true, detail: 'requeued' });
    expect((await store.getApproval(TENANT, approvalId))?.person).toMatchObject({
      holder: 'principal:alice',
      inputs: 4,
      end_url: 'https://shop.example/account',
    });
  });

  it('asks a running run to pause, and refuses a run that released its page', async () => {
    const { run } = await store.submitRun({
      tenant: TENANT,
      principal: 'alice',
      sessionId,
      input: null,
      limits: TEST_RUN_LIMITS,
      timeoutMs: 600_000,
    });
    ran(await store.claimRun(run.id, 1, 'w1'));
    expect(await takeOver(run.id, 'alice', Date.now() + 60_000)).toEqual({ ok: true, state: 'pausing' });
    expect(await store.interruptions(run.id)).toEqual({ stop: false, takeoverBy: 'principal:alice' });
    await store.releaseTakeover(run.id, TENANT, 'alice', 'principal:alice');
    expect(await store.interruptions(run.id)).toEqual({ stop: false, takeoverBy: undefined });
    ran(await store.waitRun(run.id, 'w1', 'waiting_user'));
    expect(await takeOver(run.id, 'alice', Date.now() + 60_000)).toEqual({
      ok: false,
      code: 'wrong_status',
      detail: 'waiting_user',
    });
  });

  it('hands back a takeover past its time, and the run goes on', async () => {
    const { run, approvalId } = await parkedOnPerson(600_000);
    expect(await takeOver(run.id, 'alice', Date.now() + 300)).toMatchObject({ state: 'held' });
    const resumed = await poll(
      () => store.getRun(run.id),
      (current) => current?.status === 'queued',
    );
    expect(resumed?.execution).toBe(2);
    const approval = await store.getApproval(TENANT, approvalId);
    expect(approval).toMatchObject({ status: 'approved', person: { holder: 'principal:alice' } });
    expect(approval?.person?.ended_at_ms).not.toBeNull();
  });
});
