import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiKeyScope } from '../../libs/contracts/index.js';
import { type ApiRig, startApiRig } from './api-rig.js';

const TENANT = 'chain';
const DRIVER_SCOPES: ApiKeyScope[] = ['runs:read', 'runs:write', 'approvals:write'];

/**
 * An act of a run driven over MCP waits for a person. The driving key was refused on its own
 * approvals, yet an admin driving key minted a key with `approvals:write` for the same principal and
 * approved with it (200): one agent holding an admin key defeated the person in the loop. Now no key
 * of the driver's creation chain decides — not the driver, no key that created it (transitively), no
 * key it created (transitively) — over REST or from a run page signed in with such a key. Another
 * key of the same principal outside that chain still may.
 */
describe("an MCP-driven run's approvals come from no key of its driver's creation chain", {
  timeout: 60_000,
}, () => {
  let rig: ApiRig;
  /** A key made by the operator's script (no creator): the tenant's admin. */
  let root: string;
  let sessionId: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    rig = await startApiRig('approvals-chain');
    root = await rig.key(TENANT, 'agent', ['admin']);
    const profile = await rig.call('POST', '/v1/profiles', {
      key: root,
      body: { id: 'shop', allowed_origins: ['http://127.0.0.1:9'] },
    });
    expect(profile.status).toBe(201);
    const agent = await rig.call('POST', '/v1/agents', {
      key: root,
      body: {
        model: 'scripted',
        instructions: 'Driven over MCP.',
        tools: ['browser.observe', 'browser.act'],
      },
    });
    expect(agent.status).toBe(201);
    const session = await rig.call('POST', '/v1/sessions', {
      key: root,
      body: { agent_id: agent.body.id, browser_profile_id: 'shop' },
    });
    expect(session.status).toBe(201);
    sessionId = session.body.id;
  });
  afterAll(async () => {
    await Promise.allSettled(clients.map((client) => client.close()));
    await rig?.close();
  });

  /** A key `creator` makes over REST, as an agent holding it would. */
  async function mint(creator: string, scopes: ApiKeyScope[], principal = 'agent') {
    const created = await rig.call('POST', '/v1/api-keys', { key: creator, body: { principal, scopes } });
    expect(created.status).toBe(201);
    return created.body as { key: string; key_id: string; created_by: string | null };
  }

  /**
   * A run `drivingKey` opens in MCP browser mode, parked on the approval of one act. No run worker
   * runs here: the act's request for approval is made as the run worker makes it.
   */
  async function drivenApproval(drivingKey: string): Promise<{ runId: string; approvalId: string }> {
    const client = new Client({ name: 'approvals-chain-test', version: '1.0.0' });
    clients.push(client);
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${rig.api.url}/mcp/browser/${sessionId}`), {
        requestInit: { headers: { authorization: `Bearer ${drivingKey}` } },
      }),
    );
    const runId = /run (run_\w+)/.exec(client.getInstructions() ?? '')?.[1] as string;
    expect(runId).toMatch(/^run_/);
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

  /** Both decisions, and a grant, refused 403 naming the approval alone; the act still waits. */
  async function expectRefused(key: string, runId: string, approvalId: string): Promise<void> {
    const attempts = [
      rig.call('POST', `/v1/approvals/${approvalId}/approve`, { key, body: {} }),
      rig.call('POST', `/v1/approvals/${approvalId}/approve`, {
        key,
        body: { grant: { duration_ms: 600_000, max_actions: 20 } },
      }),
      rig.call('POST', `/v1/approvals/${approvalId}/deny`, { key, body: { reason: 'no' } }),
    ];
    for (const refused of await Promise.all(attempts)) {
      expect(refused.status).toBe(403);
      expect(refused.body.error.code).toBe('forbidden');
      expect(refused.body.error.message).toContain(approvalId);
      expect(refused.body.error.message).not.toContain(runId);
    }
    const run = await rig.call('GET', `/v1/runs/${runId}`, { key: root });
    expect(run.body.status).toBe('parked');
    expect(run.body.pending_approvals.map((approval: { id: string }) => approval.id)).toEqual([approvalId]);
    expect(await rig.api.store.listGrants(runId)).toEqual([]);
  }

  it('refuses a key an admin driving key minted for its own principal (the finding), and its descendants', async () => {
    const driving = await rig.key(TENANT, 'agent', ['admin', ...DRIVER_SCOPES]);
    const { runId, approvalId } = await drivenApproval(driving);
    const minted = await mint(driving, ['approvals:write']);
    await expectRefused(minted.key, runId, approvalId);
    // Two generations down, through a key revoked since: the chain is kept in each key, not walked.
    const middle = await mint(driving, ['admin']);
    const grandchild = await mint(middle.key, ['approvals:write', 'approvals:any']);
    expect((await rig.call('DELETE', `/v1/api-keys/${middle.key_id}`, { key: driving })).status).toBe(204);
    await expectRefused(grandchild.key, runId, approvalId);
    await expectRefused(driving, runId, approvalId);
  });

  it('refuses the keys that created the driving key, even once the driving key is revoked', async () => {
    const parent = await mint(root, ['admin']);
    const driving = await mint(parent.key, DRIVER_SCOPES);
    const { runId, approvalId } = await drivenApproval(driving.key);
    await expectRefused(parent.key, runId, approvalId);
    await expectRefused(root, runId, approvalId);
    expect((await rig.call('DELETE', `/v1/api-keys/${driving.key_id}`, { key: parent.key })).status).toBe(
      204,
    );
    await expectRefused(parent.key, runId, approvalId);
  });

  it('lets a sibling key of the same principal, outside the chain, approve with a grant', async () => {
    const parent = await mint(root, ['admin']);
    const driving = await mint(parent.key, DRIVER_SCOPES);
    const sibling = await mint(parent.key, ['runs:read', 'approvals:write']);
    const { runId, approvalId } = await drivenApproval(driving.key);
    const approved = await rig.call('POST', `/v1/approvals/${approvalId}/approve`, {
      key: sibling.key,
      body: { grant: { duration_ms: 600_000, max_actions: 2 } },
    });
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({ status: 'approved', decided_by: 'agent' });
    expect((await rig.api.store.listGrants(runId)).length).toBe(1);
  });

  /** A run page session of `key`: its cookie and the CSRF token its page carries. */
  async function signIn(key: string): Promise<{ cookie: string; csrf: string }> {
    const signedIn = await fetch(`${rig.api.url}/signin`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: rig.api.url },
      body: new URLSearchParams({ key, next: '/runs' }).toString(),
    });
    expect(signedIn.status).toBe(303);
    const cookie = (signedIn.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    const runs = await fetch(`${rig.api.url}/runs`, { headers: { cookie } });
    const csrf = /name="csrf-token" content="([^"]+)"/.exec(await runs.text())?.[1] ?? '';
    expect(csrf).not.toBe('');
    return { cookie, csrf };
  }

  it('shows a run page signed in with the driving key no decision to make, and refuses one (403)', async () => {
    const driving = await mint(root, DRIVER_SCOPES);
    const sibling = await mint(root, ['runs:read', 'approvals:write']);
    const { runId, approvalId } = await drivenApproval(driving.key);

    const driver = await signIn(driving.key);
    const page = await (
      await fetch(`${rig.api.url}/runs/${runId}`, { headers: { cookie: driver.cookie } })
    ).text();
    // Reading is fine: the card is there, without its Approve and Deny.
    expect(page).toContain(`<article class="approval" data-approval-id="${approvalId}"`);
    expect(page).not.toContain('class="decide"');
    expect(page).not.toContain('value="approve"');
    expect(page).toContain(
      'decided with a key that did not create, and was not created by, the key driving this run',
    );
    const refused = await fetch(`${rig.api.url}/v1/approvals/${approvalId}/approve`, {
      method: 'POST',
      headers: { cookie: driver.cookie, 'x-csrf-token': driver.csrf, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('forbidden');

    // A person signed in with a key outside the chain is offered the decision, and makes it.
    const person = await signIn(sibling.key);
    const offered = await (
      await fetch(`${rig.api.url}/runs/${runId}`, { headers: { cookie: person.cookie } })
    ).text();
    expect(offered).toContain(`<form class="decide" data-approval-id="${approvalId}">`);
    const approved = await fetch(`${rig.api.url}/v1/approvals/${approvalId}/approve`, {
      method: 'POST',
      headers: { cookie: person.cookie, 'x-csrf-token': person.csrf, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(approved.status).toBe(200);
  });
});
