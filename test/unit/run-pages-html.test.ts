import { describe, expect, it } from 'vitest';
import { localPath } from '../../apps/api/pages/signin.js';
import { approvalViewSchema, type RunStep, type RunView } from '../../libs/contracts/index.js';
import {
  renderProfileSignInPage,
  renderRunPage,
  renderRunsPage,
  sessionIdOf,
  signInBeatMs,
} from '../../libs/ui/index.js';

const viewer = { tenant: 'dev', principal: 'dev', csrfToken: 'tok"en' };
const HOSTILE = '<img src=x onerror=alert(1)>"\'&';

function run(overrides: Partial<RunView> = {}): RunView {
  return {
    id: 'run_1',
    tenant: 'dev',
    principal: 'dev',
    session_id: 'ses_1',
    agent_id: 'agt_1',
    agent_version: 'a'.repeat(64),
    browser_profile_id: HOSTILE,
    parent_run_id: null,
    waiting_on_run_id: null,
    status: 'succeeded',
    attempt: 1,
    execution: 1,
    input: { text: 'x' },
    limits: {
      max_steps: 10,
      max_model_calls: 10,
      max_tool_calls: 10,
      reserve_model_calls: 0,
      reserve_tool_calls: 0,
      max_cost_micro_usd: null,
      cost_reserve_micro_usd: 0,
      max_cost_usd: null,
    },
    usage: { steps: 2, model_calls: 2, tool_calls: 1, cost_micro_usd: 0 },
    cancel_requested: false,
    deadline_at_ms: 1,
    created_at_ms: 1,
    updated_at_ms: 1,
    ended_at_ms: 2,
    result: { answer: HOSTILE },
    error: null,
    waiting_for: null,
    unverified: false,
    unverified_error: null,
    ...overrides,
  };
}

const toolStep: RunStep = {
  id: 'a1-t1-0',
  run_id: 'run_1',
  seq: 1,
  attempt: 1,
  turn: 1,
  index: 0,
  kind: 'tool',
  status: 'ended',
  started_at_ms: 1,
  ended_at_ms: 2,
  duration_ms: 1,
  model: null,
  tool: {
    name: 'browser.navigate',
    invocation_id: 'i',
    arguments: { url: HOSTILE },
    outcome: { ok: false, code: 'x', message: HOSTILE },
    settle: null,
    postcondition: null,
    page: { url: HOSTILE, title: HOSTILE },
    screenshot: 'shot-1.jpg',
    screenshot_status: null,
    approval_id: null,
    person: null,
    target: null,
    page_log: null,
    downloads: [],
  },
};

describe('the run pages’ HTML', () => {
  it('names an upload’s file on its pending approval card, escaped', () => {
    const approval = approvalViewSchema.parse({
      id: 'apr_0001',
      run_id: 'run_0001',
      tenant: 'dev',
      invocation_id: 'i',
      tool: 'browser.act',
      arguments: { action: 'upload', file: 'fil_0123456789abcdefghjk' },
      status: 'pending',
      created_at_ms: 1,
      decided_at_ms: null,
      decided_by: null,
      reason: null,
      grant_id: null,
      card: {
        element: { role: 'button', name: 'Receipt' },
        action: 'upload',
        page_url: 'http://shop.test/',
        page_title: 'Claims',
        screenshot: null,
        file: { id: 'fil_0123456789abcdefghjk', name: HOSTILE },
      },
    });
    const page = renderRunPage({ viewer, run: run({ status: 'parked' }), steps: [], approvals: [approval] });
    expect(page).toContain(
      'Approve upload of “&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;” (fil_0123456789abcdefghjk) on button “Receipt”?',
    );
    expect(page).not.toContain('<img src=x');
  });

  it('escapes every value a run, a step or a page title brings, so none becomes markup', () => {
    const page = renderRunPage({ viewer, run: run(), steps: [toolStep], approvals: [] });
    expect(page).not.toContain('<img src=x');
    expect(page).toContain('&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;');
    expect(page).toContain('content="tok&quot;en"');
    expect(page).not.toMatch(/<script>|<style>| style=/);
    const list = renderRunsPage({
      viewer,
      runs: [run()],
      filters: { session_id: HOSTILE },
      nextCursor: HOSTILE,
    });
    expect(list).not.toContain('<img src=x');
  });

  it('links the queue job only when given one (an operator key), offers Cancel while the run may act and Retry once it failed', () => {
    const running = renderRunPage({
      viewer,
      run: run({ status: 'running', ended_at_ms: null }),
      steps: [],
      approvals: [],
      queueJobUrl: '/admin/queues/queue/runs/run_1-x1',
    });
    expect(running).toContain('<a class="queue-job" href="/admin/queues/queue/runs/run_1-x1">');
    expect(running).toContain('data-action="cancel"');
    expect(running).not.toContain('data-action="retry"');
    const failed = renderRunPage({ viewer, run: run({ status: 'failed' }), steps: [], approvals: [] });
    expect(failed).not.toContain('queue-job');
    expect(failed).not.toContain('data-action="cancel"');
    expect(failed).toContain('data-action="retry"');
  });

  it('shows the live view only while a run may still act', () => {
    expect(
      renderRunPage({
        viewer,
        run: run({ status: 'running', ended_at_ms: null }),
        steps: [toolStep],
        approvals: [],
      }),
    ).toContain('id="live-frame" src="/v1/runs/run_1/artifacts/shot-1.jpg"');
    expect(renderRunPage({ viewer, run: run(), steps: [toolStep], approvals: [] })).not.toContain(
      'live-frame',
    );
  });

  it('shows a screenshot still being taken as pending, and one that failed with its reason', () => {
    const withStatus = (status: NonNullable<RunStep['tool']>['screenshot_status']): RunStep => ({
      ...toolStep,
      tool: { ...(toolStep.tool as NonNullable<RunStep['tool']>), screenshot_status: status },
    });
    const live = run({ status: 'running', ended_at_ms: null });
    const pending = renderRunPage({
      viewer,
      run: live,
      steps: [withStatus({ state: 'pending', reason: null })],
      approvals: [],
    });
    expect(pending).toContain('class="shot-pending" data-shot="shot-1.jpg"');
    expect(pending).not.toContain('img class="thumb"');
    // The live view shows no frame it cannot load yet.
    expect(pending).toContain('id="live-frame-empty"');
    const failed = renderRunPage({
      viewer,
      run: live,
      steps: [withStatus({ state: 'failed', reason: 'capture_timeout' })],
      approvals: [],
    });
    expect(failed).toContain('No screenshot: the page could not be captured in time (tried twice).');
    const stored = renderRunPage({
      viewer,
      run: live,
      steps: [withStatus({ state: 'stored', reason: null })],
      approvals: [],
    });
    expect(stored).toContain('img class="thumb" src="/v1/runs/run_1/artifacts/shot-1.jpg"');
  });

  it('shows a flat output as a table and a nested one as its JSON, escaped; no output, no section', () => {
    const flat = renderRunPage({
      viewer,
      run: run({ result: { answer: '{}', output: { title: HOSTILE, price: 12.5, sold: false } } }),
      steps: [],
      approvals: [],
    });
    expect(flat).toContain('<section id="output">');
    expect(flat).toContain('<th scope="row">price</th><td>12.5</td>');
    expect(flat).toContain('<th scope="row">sold</th><td>false</td>');
    expect(flat).not.toContain('<img src=x');
    const nested = renderRunPage({
      viewer,
      run: run({ result: { answer: '[]', output: [{ sku: HOSTILE }] } }),
      steps: [],
      approvals: [],
    });
    expect(nested).toMatch(/<pre class="output">\[\n {2}\{\n {4}&quot;sku&quot;/);
    expect(nested).not.toContain('<img src=x');
    expect(renderRunPage({ viewer, run: run(), steps: [], approvals: [] })).not.toContain('id="output"');
  });

  it('sends a signed-in person back only to a path of this site', () => {
    expect(localPath('/runs/run_1?x=1')).toBe('/runs/run_1?x=1');
    for (const elsewhere of [
      '//evil.example/',
      '/\\evil.example',
      'https://evil.example/',
      'javascript:alert(1)',
      undefined,
    ])
      expect(localPath(elsewhere)).toBe('/runs');
  });

  it('reads the session id among the parsed cookies, and none from an empty or lookalike one', () => {
    expect(sessionIdOf({ a: '1', lh_session: 'abc', b: '2' })).toBe('abc');
    expect(sessionIdOf({ lh_session_x: 'abc' })).toBeUndefined();
    expect(sessionIdOf({ lh_session: '' })).toBeUndefined();
    expect(sessionIdOf(undefined)).toBeUndefined();
  });
});

describe('the sign-in page', () => {
  it('beats three times within a short lease, and every 30 s within a long one', () => {
    expect(signInBeatMs(6_000)).toBe(2_000);
    expect(signInBeatMs(120_000)).toBe(30_000);
    expect(signInBeatMs(900)).toBe(1_000);
    const page = renderProfileSignInPage({
      viewer: { tenant: 't1', principal: 'dev', csrfToken: 'token' },
      signIn: {
        signin_id: 'signin_1',
        profile_id: 'shop',
        status: 'open',
        url: 'https://shop.example/login',
        expires_at_ms: 0,
      },
      beatMs: signInBeatMs(6_000),
    });
    expect(page).toContain('data-beat-ms="2000"');
  });
});
