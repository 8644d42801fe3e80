import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiKeyScope } from '../../libs/contracts/index.js';
import { type ApiRig, startApiRig } from './api-rig.js';

/**
 * Any key with `approvals:write` in the tenant approved any principal's run, though an
 * act waits for "its owner's approval". An approval is decided by its run's principal, or by a key
 * with `approvals:any` (a tenant `admin` implies it within its tenant); anyone else gets 404.
 */
describe("approvals are decided by the run's owner or by approvals:any", { timeout: 30_000 }, () => {
  let rig: ApiRig;
  let sessionOfAlice: string;
  let alice: string;

  beforeAll(async () => {
    rig = await startApiRig('approvals-owner');
    const admin = await rig.key('appr', 'ops', ['admin']);
    alice = await rig.key('appr', 'alice', ['runs:write', 'runs:read', 'approvals:write']);
    const agent = await rig.call('POST', '/v1/agents', {
      key: admin,
      body: { model: 'scripted', instructions: 'a' },
    });
    const session = await rig.call('POST', '/v1/sessions', { key: alice, body: { agent_id: agent.body.id } });
    sessionOfAlice = session.body.id;
  });
  afterAll(() => rig?.close());

  /** A run of alice's, parked on one pending approval of a browser act. */
  async function parkedApproval(): Promise<{ runId: string; approvalId: string }> {
    const submitted = await rig.call('POST', `/v1/sessions/${sessionOfAlice}/runs`, {
      key: alice,
      body: { input: 'click the button' },
    });
    expect(submitted.status).toBe(201);
    const runId: string = submitted.body.id;
    const owner = `owner-${runId}`;
    expect((await rig.api.store.claimRun(runId, 1, owner)).ok).toBe(true);
    const { approvalId, transition } = await rig.api.store.requestApproval(runId, owner, {
      invocationId: `a1:1:0:${runId}`,
      tool: 'browser.act',
      arguments: { element: 'e1', action: 'click' },
    });
    expect(transition.ok).toBe(true);
    return { runId, approvalId };
  }

  const keyOf = (principal: string, scopes: ApiKeyScope[], tenant = 'appr') =>
    rig.key(tenant, principal, scopes);

  it("answers 404 to another principal's approvals:write key, on approve and on deny, and leaves it pending", async () => {
    const { runId, approvalId } = await parkedApproval();
    const bob = await keyOf('bob', ['runs:read', 'approvals:write']);
    const approve = await rig.call('POST', `/v1/approvals/${approvalId}/approve`, { key: bob, body: {} });
    expect(approve.status).toBe(404);
    // The answer names what was asked for, an approval, and nothing of the run it waits in.
    expect(approve.body.error).toEqual({ code: 'not_found', message: `approval ${approvalId} not found` });
    const deny = await rig.call('POST', `/v1/approvals/${approvalId}/deny`, {
      key: bob,
      body: { reason: 'no' },
    });
    expect(deny.status).toBe(404);
    expect(deny.body.error.message).toBe(`approval ${approvalId} not found`);
    const run = await rig.call('GET', `/v1/runs/${runId}`, { key: alice });
    expect(run.body.status).toBe('parked');
    expect(run.body.pending_approvals.map((approval: { id: string }) => approval.id)).toEqual([approvalId]);
  });

  it("lets the run's own principal approve", async () => {
    const { runId, approvalId } = await parkedApproval();
    const approve = await rig.call('POST', `/v1/approvals/${approvalId}/approve`, { key: alice, body: {} });
    expect(approve.status).toBe(200);
    expect(approve.body).toMatchObject({ status: 'approved', decided_by: 'alice' });
    expect((await rig.call('GET', `/v1/runs/${runId}`, { key: alice })).body.status).toBe('queued');
  });

  it('lets a key with approvals:any decide for another principal', async () => {
    const { approvalId } = await parkedApproval();
    const carol = await keyOf('carol', ['approvals:write', 'approvals:any']);
    const deny = await rig.call('POST', `/v1/approvals/${approvalId}/deny`, {
      key: carol,
      body: { reason: 'no' },
    });
    expect(deny.status).toBe(200);
    expect(deny.body).toMatchObject({ status: 'denied', decided_by: 'carol' });
  });

  it("lets a tenant admin decide for its tenant's principals, and no other tenant's admin", async () => {
    const { approvalId } = await parkedApproval();
    const outsider = await keyOf('root', ['admin'], 'appr-other');
    expect(
      (await rig.call('POST', `/v1/approvals/${approvalId}/approve`, { key: outsider, body: {} })).status,
    ).toBe(404);
    const admin = await keyOf('boss', ['admin']);
    const approve = await rig.call('POST', `/v1/approvals/${approvalId}/approve`, { key: admin, body: {} });
    expect(approve.status).toBe(200);
    expect(approve.body.decided_by).toBe('boss');
  });
});
