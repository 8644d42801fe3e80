import { Redis } from 'ioredis';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { PageEngine } from '../../libs/browser/index.js';
import type { TranscriptEntry } from '../../libs/runtime/index.js';
import { RunTranscripts } from '../../libs/store/run-transcript.js';
import { launchTestBrowser } from '../fixtures/chromium.js';
import { type ControlsSite, CONTROL_NAMES as NAMES, startControlsSite } from '../fixtures/controls-site.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

const limits = () => ({ deadlineMs: Date.now() + 30_000 });

/**
 * A page with one of every control a person can use is observed with the
 * roles and states Playwright's getByRole finds them by, and a scripted run through the whole
 * fleet fills, selects, checks and clicks each of them; what the page's server received says it.
 */
describe('every control on a page, observed and acted on', { timeout: 240_000 }, () => {
  let site: ControlsSite;
  let browser: Browser;
  let fleet: FleetHandle;
  let redis: Redis;
  const prefix = uniquePrefix('every-control');
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    [site, browser, fleet] = await Promise.all([
      startControlsSite(),
      launchTestBrowser(),
      startTestFleet(prefix),
    ]);
    redis = new Redis(testRedisUrl());
  });

  afterAll(async () => {
    redis?.disconnect();
    await fleet?.close();
    await browser?.close();
    await site?.close();
  });

  it('observes each control with the role, name and state Playwright’s getByRole finds it by', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const engine = await PageEngine.create(page, { allowedOrigins: [site.origin] });
    try {
      const { observation } = await engine.navigate({ url: `${site.origin}/form` }, limits());
      // The roles and states the issue names, each as Playwright's getByRole knows the control.
      const expected: Array<[string, string, Record<string, unknown>, string?]> = [
        [NAMES.text, 'textbox', { value: '' }],
        [NAMES.email, 'textbox', { value: '' }, 'email'],
        [NAMES.password, 'textbox', { value_present: false }, 'password'],
        [NAMES.number, 'spinbutton', { value: '1', min: 1, max: 10 }, 'number'],
        [NAMES.date, 'textbox', { value: '' }, 'date'],
        [NAMES.time, 'textbox', { value: '' }, 'time'],
        [NAMES.datetimeLocal, 'textbox', { value: '' }, 'datetime-local'],
        [NAMES.month, 'textbox', { value: '' }, 'month'],
        [NAMES.week, 'textbox', { value: '' }, 'week'],
        [NAMES.color, 'textbox', { value: '#000000' }, 'color'],
        [NAMES.range, 'slider', { value: '50', min: 0, max: 100 }, 'range'],
        [NAMES.search, 'searchbox', { value: '' }, 'search'],
        [NAMES.tel, 'textbox', { value: '' }, 'tel'],
        [NAMES.url, 'textbox', { value: '' }, 'url'],
        [NAMES.textarea, 'textbox', { value: '' }],
        [NAMES.select, 'combobox', { value: 'Medium' }],
        [NAMES.multiSelect, 'listbox', { values: [] }],
        [NAMES.checkbox, 'checkbox', { checked: false }],
        [NAMES.radioStandard, 'radio', { checked: true }],
        [NAMES.radioExpress, 'radio', { checked: false }],
        [NAMES.contenteditable, 'textbox', {}],
        [NAMES.file, 'button', {}, 'file'],
        [NAMES.shadowInput, 'textbox', { value: '' }],
        [NAMES.shadowButton, 'button', {}],
        [NAMES.frameInput, 'textbox', { value: '' }],
        [NAMES.newTabLink, 'link', {}],
        [NAMES.submit, 'button', {}],
      ];
      // One table, so a failure shows every control that differs at once.
      const pick = (state: Record<string, unknown>, keys: string[]) =>
        Object.fromEntries(keys.map((key) => [key, state[key]]));
      const seen = Object.fromEntries(
        expected.map(([name, , state]) => {
          const matches = observation.elements.filter((element) => element.name === name);
          const [element] = matches;
          if (matches.length !== 1 || !element) return [name, `${matches.length} observed`];
          return [
            name,
            {
              role: element.role,
              input_type: element.input_type,
              state: pick(element.state, Object.keys(state)),
            },
          ];
        }),
      );
      expect
        .soft(seen)
        .toEqual(
          Object.fromEntries(
            expected.map(([name, role, state, inputType]) => [name, { role, input_type: inputType, state }]),
          ),
        );

      // Every observed element, whatever it is, is the one element getByRole finds by its role
      // and exact name (in the page or its frame), with the same checked, selected, expanded and
      // disabled state where the observation states one.
      const frames = page.frames();
      const unmatched: unknown[] = [];
      for (const element of observation.elements) {
        const { checked, selected, expanded, disabled } = element.state;
        const options = {
          name: element.name,
          exact: true,
          ...(checked !== undefined ? { checked: checked === true } : {}),
          ...(selected !== undefined ? { selected } : {}),
          ...(expanded !== undefined ? { expanded } : {}),
          ...(disabled !== undefined ? { disabled } : {}),
        };
        let count = 0;
        for (const frame of frames)
          count += await frame
            .getByRole(element.role as Parameters<typeof page.getByRole>[0], options)
            .count();
        if (count !== 1)
          unmatched.push({ role: element.role, name: element.name, state: element.state, count });
      }
      expect.soft(unmatched).toEqual([]);

      // The submit button is 5,000 px down: the observation says the page is longer than the view.
      expect(observation.scroll?.height).toBeGreaterThan(5_000);
      expect(observation.scroll?.y).toBe(0);
    } finally {
      await engine.close();
      await context.close();
    }
  });

  it('fills, selects, checks and clicks every control in a scripted run, and the server receives each', async () => {
    const act = (
      role: string,
      name: string,
      action: string,
      more: { text?: string; labels?: string[]; postcondition?: string } = {},
    ) => ({
      tool: 'browser.act',
      target: { role, name },
      action,
      ...(more.text !== undefined ? { text: more.text } : {}),
      ...(more.labels !== undefined ? { labels: more.labels } : {}),
      ...(more.postcondition !== undefined
        ? { postcondition: { role: 'heading', name: more.postcondition, wait_ms: 5_000 } }
        : {}),
    });
    const fill = (role: string, name: string, text: string) => act(role, name, 'fill', { text });
    const steps = [
      { tool: 'browser.navigate', url: `${site.origin}/form` },
      fill('textbox', NAMES.text, 'Ada Lovelace'),
      fill('textbox', NAMES.email, 'ada@example.com'),
      fill('textbox', NAMES.password, 'analytical-engine'),
      fill('spinbutton', NAMES.number, '3'),
      fill('textbox', NAMES.date, '2026-12-24'),
      fill('textbox', NAMES.time, '09:30'),
      fill('textbox', NAMES.datetimeLocal, '2026-12-24T09:30'),
      fill('textbox', NAMES.month, '2026-12'),
      fill('textbox', NAMES.week, '2026-W52'),
      fill('textbox', NAMES.color, '#3366ff'),
      // A slider moves by its keys, as a person moves it: End is its maximum.
      act('slider', NAMES.range, 'press', { text: 'End' }),
      fill('searchbox', NAMES.search, 'lace'),
      fill('textbox', NAMES.tel, '+44 20 7946 0000'),
      fill('textbox', NAMES.url, 'https://example.com/'),
      fill('textbox', NAMES.textarea, 'Leave at the door'),
      act('combobox', NAMES.select, 'select', { text: 'Large' }),
      act('listbox', NAMES.multiSelect, 'select', { labels: ['Olives', 'Onions'] }),
      act('checkbox', NAMES.checkbox, 'check'),
      act('radio', NAMES.radioExpress, 'check'),
      fill('textbox', NAMES.contenteditable, 'Ring twice'),
      fill('textbox', NAMES.shadowInput, 'XMAS10'),
      act('button', NAMES.shadowButton, 'click', { postcondition: 'Coupon applied' }),
      fill('textbox', NAMES.frameInput, 'Happy holidays'),
      act('link', NAMES.newTabLink, 'click', { postcondition: 'Confirm your order' }),
      act('button', 'Confirm order', 'click', { postcondition: 'Confirmed' }),
      act('button', 'Close this tab', 'click', { postcondition: 'Order form' }),
      act('button', NAMES.submit, 'click', { postcondition: 'Order received' }),
    ];
    // A custom agent takes run_defaults (32 steps, 24 model calls), and a scripted model given no
    // tools past its budget answers at once: this form's 28 calls need an agent allowing them.
    expect(
      (await call('POST', '/v1/profiles', { id: 'every-control', allowed_origins: [site.origin] })).status,
    ).toBe(201);
    const agent = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: 'Fill in the order form.',
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
      limits: { max_steps: 100, max_model_calls: 60, max_tool_calls: 60 },
    });
    expect(agent.status).toBe(201);
    const session = await call('POST', '/v1/sessions', {
      agent_id: agent.body.id,
      browser_profile_id: 'every-control',
    });
    const sessionId = session.body.id as string;
    const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
      input: 'Fill in the order form',
      script: { steps, answer: 'Ordered.' },
    });
    expect(submitted.status).toBe(201);
    const runId = submitted.body.id as string;

    // The first act parks; its approval grants the rest of the form.
    let run = await waitForStatus(runId, ['parked', 'succeeded', 'failed'], 120_000);
    while (run.status === 'parked') {
      const approved = await call('POST', `/v1/approvals/${run.pending_approvals[0].id}/approve`, {
        grant: { duration_ms: 600_000, max_actions: 64 },
      });
      expect(approved.status).toBe(200);
      run = await waitForStatus(runId, ['parked', 'succeeded', 'failed'], 120_000);
    }
    expect({ status: run.status, error: run.error ?? null }).toEqual({ status: 'succeeded', error: null });
    const { steps: recorded } = (await call('GET', `/v1/runs/${runId}/steps?limit=100`)).body;
    const calls = recorded.filter((step: { tool?: unknown }) => step.tool);
    expect(calls).toHaveLength(steps.length);

    expect.soft(site.coupons).toEqual(['XMAS10']);
    expect.soft(site.confirmations).toEqual(['confirmed']);
    expect(site.orders).toHaveLength(1);
    const order = site.orders[0] as URLSearchParams;
    const fields = Object.fromEntries(
      [...new Set(order.keys())].map((key) => [key, order.getAll(key)] as const),
    );
    expect(fields).toEqual({
      full_name: ['Ada Lovelace'],
      email: ['ada@example.com'],
      secret: ['analytical-engine'],
      quantity: ['3'],
      delivery_date: ['2026-12-24'],
      delivery_time: ['09:30'],
      appointment: ['2026-12-24T09:30'],
      billing_month: ['2026-12'],
      billing_week: ['2026-W52'],
      colour: ['#3366ff'],
      volume: ['100'],
      search_terms: ['lace'],
      phone: ['+44 20 7946 0000'],
      website: ['https://example.com/'],
      comments: ['Leave at the door'],
      size: ['Large'],
      toppings: ['Olives', 'Onions'],
      gift: ['on'],
      shipping: ['express'],
      message: ['Ring twice'],
      // The file input is observed, never acted on: it posts its empty name.
      attachment: [''],
      coupon: ['XMAS10'],
      frame_note: ['Happy holidays'],
    });

    // The link's act says a tab opened and became current; closing it handed back to the form.
    const observed = (await new RunTranscripts(redis, `${prefix}:`).load<TranscriptEntry>(runId)).flatMap(
      (entry) =>
        entry.kind === 'tool' && entry.outcome.ok
          ? [(entry.outcome.result as { observation: { title: string; tabs?: unknown } }).observation]
          : [],
    );
    const stepOf = (name: string) => steps.findIndex((step) => 'target' in step && step.target.name === name);
    expect(observed[stepOf(NAMES.newTabLink)]).toMatchObject({
      title: 'Confirm',
      tabs: { count: 2, index: 1, event: 'opened' },
    });
    expect(observed[stepOf('Close this tab')]).toMatchObject({
      title: 'Every control',
      tabs: { count: 1, index: 0, event: 'closed' },
    });

    // The far button's act waited for the page its submit led to.
    expect(calls.at(-1).tool).toMatchObject({
      postcondition: { result: 'satisfied' },
      page: { title: 'Received' },
    });
  });
});
