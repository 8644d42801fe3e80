import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunLimits, RunView } from '../../libs/contracts/index.js';
import { RunStore, type RunTransition } from '../../libs/store/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran } from '../fixtures/run-store.js';

const LIMITS: RunLimits = {
  max_steps: 160,
  max_model_calls: 120,
  max_tool_calls: 160,
  reserve_model_calls: 2,
  reserve_tool_calls: 4,
  max_cost_micro_usd: 30_000_000,
  cost_reserve_micro_usd: 3_000_000,
};
const TENANT = 'acme';
const MINUTE_MS = 60_000;

describe('the run store: approvals and task grants', () => {
  const prefix = `${uniquePrefix('run-store-approvals')}:`;
  let redis: Redis;
  let store: RunStore;
  let nowMs = 1_800_000_000_000;
  let sessionId: string;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-run-store-approvals');
    store = new RunStore(redis, prefix, () => nowMs);
    sessionId = await createTestSession(store, TENANT, { instructions: 'act', browserProfileId: 'shop' });
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix.slice(0, -1));
    await closeRedis(redis);
  });

  /** A run claimed by `owner` at execution 1. */
  async function runningRun(owner = 'w1'): Promise<RunView> {
    const { run } = await store.submitRun({
      tenant: TENANT,
      principal: 'alice',
      sessionId,
      input: { message: 'buy' },
      limits: LIMITS,
      timeoutMs: 3_600_000,
    });
    return ran(await store.claimRun(run.id, 1, owner));
  }

  async function parkedOnApproval(owner = 'w1'): Promise<{ run: RunView; approvalId: string }> {
    const run = await runningRun(owner);
    const { approvalId, transition } = await store.requestApproval(run.id, owner, {
      invocationId: `${run.id}-a1-s0-i0`,
      tool: 'browser.act',
      arguments: { element: 'e1', action: 'click' },
    });
    return { run: ran(transition), approvalId };
  }

  it('reads a run and its pending approvals as of one moment: never running with an approval pending', async () => {
    // CI, stop 24: GET /v1/runs/:id read the run, then its approvals; a park between the two reads
    // answered `running` with a pending approval, and MCP's wait_for_run stopped on it.
    const torn: string[] = [];
    for (let round = 0; round < 30; round += 1) {
      const run = await runningRun(`w-torn-${round}`);
      let parked = false;
      const reads = (async () => {
        while (!parked) {
          const detail = await store.getRunDetail(run.id, TENANT);
          if (detail?.run.status === 'running' && detail.pendingApprovals.length > 0) torn.push(run.id);
          if (detail?.run.status === 'parked') return;
        }
      })();
      await new Promise((resolve) => setImmediate(resolve));
      await store.requestApproval(run.id, `w-torn-${round}`, {
        invocationId: `${run.id}-a1-s0-i0`,
        tool: 'browser.act',
        arguments: { element: 'e1', action: 'click' },
      });
      await reads;
      parked = true;
      const detail = await store.getRunDetail(run.id, TENANT);
      expect(detail?.run.status).toBe('parked');
      expect(detail?.pendingApprovals).toHaveLength(1);
    }
    expect(torn).toEqual([]);
    expect(await store.getRunDetail('run_00000000000000000000', TENANT)).toBeUndefined();
  });

  it('records a pending approval and parks the run in the same step', async () => {
    const { run, approvalId } = await parkedOnApproval();
    expect(run.status).toBe('parked');
    const approval = await store.getApproval(TENANT, approvalId);
    expect(approval).toMatchObject({
      id: approvalId,
      run_id: run.id,
      status: 'pending',
      tool: 'browser.act',
      arguments: { element: 'e1', action: 'click' },
      decided_at_ms: null,
    });
    expect((await store.listPendingApprovals(TENANT, run.id)).map((a) => a.id)).toEqual([approvalId]);
    expect((await store.listPendingApprovals(TENANT)).map((a) => a.id)).toContain(approvalId);
    const types = (await store.readEvents(run.id)).map((event) => event.type);
    expect(types.slice(-2)).toEqual(['approval.requested', 'run.parked']);
  });

  it('refuses an approval request from a worker whose token is stale, writing nothing', async () => {
    const run = await runningRun('owner');
    const { approvalId, transition } = await store.requestApproval(run.id, 'stale', {
      invocationId: 'x',
      tool: 'browser.act',
      arguments: {},
    });
    expect(transition).toMatchObject({ ok: false, code: 'not_owner' });
    expect(await store.getApproval(TENANT, approvalId)).toBeUndefined();
    expect(await store.listApprovals(run.id)).toEqual([]);
    expect((await store.listPendingApprovals(TENANT)).map((a) => a.id)).not.toContain(approvalId);
    expect((await store.getRun(run.id))?.status).toBe('running');
  });

  it("hides another tenant's approvals and refuses its decisions", async () => {
    const { approvalId } = await parkedOnApproval();
    expect(await store.getApproval('other', approvalId)).toBeUndefined();
    expect(await store.listPendingApprovals('other')).toEqual([]);
    expect(await store.approve('other', approvalId, 'mallory')).toMatchObject({
      ok: false,
      code: 'not_found',
    });
    expect((await store.getApproval(TENANT, approvalId))?.status).toBe('pending');
  });

  it('re-queues the run as a new execution when its approval is approved', async () => {
    const { run, approvalId } = await parkedOnApproval();
    nowMs += 10;
    const decision = await store.approve(TENANT, approvalId, 'alice');
    expect(decision).toMatchObject({
      ok: true,
      detail: 'requeued',
      run: { status: 'queued', execution: 2, attempt: 1 },
    });
    expect(await store.getApproval(TENANT, approvalId)).toMatchObject({
      status: 'approved',
      decided_by: 'alice',
      decided_at_ms: nowMs,
      grant_id: null,
    });
    expect(await store.listPendingApprovals(TENANT, run.id)).toEqual([]);
    expect((await store.listPendingApprovals(TENANT)).map((a) => a.id)).not.toContain(approvalId);
    expect(await store.approve(TENANT, approvalId, 'alice')).toMatchObject({
      ok: false,
      code: 'already_decided',
    });
    const types = (await store.readEvents(run.id)).map((event) => event.type);
    expect(types.slice(-2)).toEqual(['approval.approved', 'run.requeued']);
    // Any worker resumes it.
    expect(ran(await store.claimRun(run.id, 2, 'w2')).status).toBe('running');
  });

  it('records a denial with its reason and re-queues the run', async () => {
    const { run, approvalId } = await parkedOnApproval();
    const decision = await store.deny(TENANT, approvalId, 'alice', 'not this one');
    expect(decision).toMatchObject({ ok: true, detail: 'requeued', run: { status: 'queued', execution: 2 } });
    expect(await store.getApproval(TENANT, approvalId)).toMatchObject({
      status: 'denied',
      reason: 'not this one',
    });
    expect((await store.readEvents(run.id)).map((event) => event.type).slice(-2)).toEqual([
      'approval.denied',
      'run.requeued',
    ]);
    expect(await store.deny(TENANT, approvalId, 'alice', 'again')).toMatchObject({
      ok: false,
      code: 'already_decided',
    });
  });

  it('expires the pending approvals of a cancelled run, and refuses to decide them', async () => {
    const { run, approvalId } = await parkedOnApproval();
    ran(await store.cancelRun(TENANT, run.id));
    expect((await store.getApproval(TENANT, approvalId))?.status).toBe('expired');
    expect(await store.approve(TENANT, approvalId, 'alice')).toMatchObject({
      ok: false,
      code: 'already_decided',
    });
    expect((await store.getRun(run.id))?.status).toBe('cancelled');
  });

  it('refuses a grant of 31 minutes or 201 actions at creation and leaves the approval pending', async () => {
    const { run, approvalId } = await parkedOnApproval();
    for (const grant of [
      { duration_ms: 31 * MINUTE_MS, max_actions: 10 },
      { duration_ms: 10 * MINUTE_MS, max_actions: 201 },
      { duration_ms: 0, max_actions: 10 },
    ]) {
      expect(await store.approve(TENANT, approvalId, 'alice', grant)).toMatchObject({
        ok: false,
        code: 'grant_out_of_bounds',
      });
    }
    expect((await store.getApproval(TENANT, approvalId))?.status).toBe('pending');
    expect(await store.listGrants(run.id)).toEqual([]);
    expect((await store.getRun(run.id))?.status).toBe('parked');
    // The bounds themselves are allowed.
    const decision = await store.approve(TENANT, approvalId, 'alice', {
      duration_ms: 30 * MINUTE_MS,
      max_actions: 200,
    });
    expect(decision).toMatchObject({ ok: true, detail: 'requeued' });
    const [grant] = await store.listGrants(run.id);
    expect(grant).toMatchObject({ max_actions: 200, used_actions: 0, expires_at_ms: nowMs + 30 * MINUTE_MS });
  });

  it('uses a grant one action at a time and stops at its count', async () => {
    const { run, approvalId } = await parkedOnApproval('w1');
    ran(
      (await store.approve(TENANT, approvalId, 'alice', {
        duration_ms: 5 * MINUTE_MS,
        max_actions: 3,
      })) as RunTransition,
    );
    ran(await store.claimRun(run.id, 2, 'w2'));
    expect(await store.consumeGrant(run.id, 'w1', 'inv-0')).toMatchObject({ ok: false, code: 'not_owner' });
    const uses = [];
    for (let i = 0; i < 4; i++) uses.push(await store.consumeGrant(run.id, 'w2', `inv-${i}`));
    expect(uses.map((use) => (use.ok ? use.usedActions : use.code))).toEqual([1, 2, 3, 'no_live_grant']);
    expect((await store.listGrants(run.id))[0]?.used_actions).toBe(3);
    const grantEvents = (await store.readEvents(run.id)).filter((event) => event.type === 'grant.used');
    expect(grantEvents.map((event) => event.data.used)).toEqual([1, 2, 3]);
  });

  it('charges one use per invocation, however often a resumed call asks again', async () => {
    const { run, approvalId } = await parkedOnApproval('w1');
    ran(
      (await store.approve(TENANT, approvalId, 'alice', {
        duration_ms: 5 * MINUTE_MS,
        max_actions: 2,
      })) as RunTransition,
    );
    ran(await store.claimRun(run.id, 2, 'w2'));
    const first = await store.consumeGrant(run.id, 'w2', 'run-a1-s3-i0');
    const again = await store.consumeGrant(run.id, 'w2', 'run-a1-s3-i0');
    expect([first, again].map((use) => (use.ok ? use.usedActions : use.code))).toEqual([1, 1]);
    expect(await store.consumeGrant(run.id, 'w2', 'run-a1-s4-i0')).toMatchObject({
      ok: true,
      usedActions: 2,
    });
    expect((await store.listGrants(run.id))[0]?.used_actions).toBe(2);
    const grantEvents = (await store.readEvents(run.id)).filter((event) => event.type === 'grant.used');
    expect(grantEvents).toHaveLength(2);
  });

  it('never lets racing uses of a grant pass its count', async () => {
    const { run, approvalId } = await parkedOnApproval('w1');
    ran(
      (await store.approve(TENANT, approvalId, 'alice', {
        duration_ms: 5 * MINUTE_MS,
        max_actions: 5,
      })) as RunTransition,
    );
    ran(await store.claimRun(run.id, 2, 'w2'));
    const uses = await Promise.all(
      Array.from({ length: 20 }, (_, i) => store.consumeGrant(run.id, 'w2', `inv-${i}`)),
    );
    expect(uses.filter((use) => use.ok)).toHaveLength(5);
  });

  it('stops a grant at its expiry time', async () => {
    const { run, approvalId } = await parkedOnApproval('w1');
    ran(
      (await store.approve(TENANT, approvalId, 'alice', {
        duration_ms: 2 * MINUTE_MS,
        max_actions: 50,
      })) as RunTransition,
    );
    ran(await store.claimRun(run.id, 2, 'w2'));
    nowMs += 2 * MINUTE_MS - 1;
    expect(await store.consumeGrant(run.id, 'w2', 'inv-1')).toMatchObject({ ok: true, usedActions: 1 });
    nowMs += 1;
    expect(await store.consumeGrant(run.id, 'w2', 'inv-2')).toMatchObject({
      ok: false,
      code: 'no_live_grant',
    });
  });

  it('answers no live grant for a run that was never granted one', async () => {
    const run = await runningRun('w');
    expect(await store.consumeGrant(run.id, 'w', 'inv-1')).toMatchObject({
      ok: false,
      code: 'no_live_grant',
    });
  });

  it('does not carry a grant over to a retried attempt', async () => {
    const { run, approvalId } = await parkedOnApproval('w1');
    ran(
      (await store.approve(TENANT, approvalId, 'alice', {
        duration_ms: 5 * MINUTE_MS,
        max_actions: 5,
      })) as RunTransition,
    );
    ran(await store.claimRun(run.id, 2, 'w2'));
    ran(await store.finishRun(run.id, 'w2', { status: 'failed', code: 'model_error', message: 'x' }));
    const retried = ran(await store.retryRun(TENANT, run.id));
    ran(await store.claimRun(run.id, retried.execution, 'w3'));
    expect(await store.consumeGrant(run.id, 'w3', 'inv-1')).toMatchObject({
      ok: false,
      code: 'no_live_grant',
    });
  });
});
