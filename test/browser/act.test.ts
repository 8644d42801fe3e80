import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EngineHarness, limits, ref } from './harness.js';

const harness = new EngineHarness();
beforeAll(() => harness.start());
afterAll(() => harness.stop());
afterEach(() => harness.cleanup());

async function controlsPage() {
  const { engine, page } = await harness.engine();
  const { observation } = await engine.navigate({ url: harness.url('/pages/controls.html') }, limits());
  const log = () => page.evaluate(`document.getElementById('log').textContent`);
  return { engine, page, observation, log };
}

describe('acting by revision (DESIGN §6, ADR-0130 d6)', () => {
  it('refuses a stale revision with page_changed before dispatching anything', async () => {
    const { engine, observation, log } = await controlsPage();
    const newer = await engine.observe({}, limits());
    await expect(
      engine.act(
        { revision: observation.revision, element: ref(observation, 'Save'), action: 'click' },
        limits(),
      ),
    ).rejects.toMatchObject({ code: 'page_changed' });
    expect(await log()).toBe('nothing yet');
    // The current revision still acts.
    const acted = await engine.act(
      { revision: newer.observation.revision, element: ref(newer.observation, 'Save'), action: 'click' },
      limits(),
    );
    expect(acted.observation.text).toMatch(/saving|saved/);
  });

  it('refuses a reference the page no longer has with element_not_found', async () => {
    const { engine, page, observation, log } = await controlsPage();
    await expect(
      engine.act({ revision: observation.revision, element: 'e999', action: 'click' }, limits()),
    ).rejects.toMatchObject({ code: 'element_not_found' });
    await page.evaluate(`document.getElementById('save').remove()`);
    await expect(
      engine.act(
        { revision: observation.revision, element: ref(observation, 'Save'), action: 'click' },
        limits(),
      ),
    ).rejects.toMatchObject({ code: 'element_not_found' });
    expect(await log()).toBe('nothing yet');
  });

  it('refuses a disabled or non-editable target with action_not_allowed', async () => {
    const { engine, observation, page } = await controlsPage();
    const attempts = [
      { element: ref(observation, 'Locked'), action: 'click' as const },
      { element: ref(observation, 'Save'), action: 'fill' as const, text: 'x' },
      { element: ref(observation, 'Code'), action: 'fill' as const, text: 'x' },
      { element: ref(observation, 'Name'), action: 'check' as const },
      { element: ref(observation, 'Colour'), action: 'select' as const, text: 'Purple' },
    ];
    for (const attempt of attempts) {
      await expect(
        engine.act({ revision: observation.revision, ...attempt }, limits()),
      ).rejects.toMatchObject({
        code: 'action_not_allowed',
      });
    }
    expect(await page.evaluate(`document.getElementById('code').value`)).toBe('42');
  });

  it('refuses malformed arguments with invalid_arguments before dispatching anything', async () => {
    const { engine, observation, page } = await controlsPage();
    const name = ref(observation, 'Name');
    await expect(
      engine.act({ revision: observation.revision, element: name, action: 'fill' }, limits()),
    ).rejects.toMatchObject({ code: 'invalid_arguments' });
    await expect(
      engine.act(
        { revision: observation.revision, element: name, action: 'press', text: 'NoSuchKey' },
        limits(),
      ),
    ).rejects.toMatchObject({ code: 'invalid_arguments' });
    await expect(
      engine.act({ revision: observation.revision, element: name, action: 'hover' } as never, limits()),
    ).rejects.toMatchObject({ code: 'invalid_arguments' });
    expect(await page.evaluate(`document.getElementById('name').value`)).toBe('');
  });

  it('calls beforeDispatch once, after the refusals and before the action; a throw there dispatches nothing', async () => {
    const { engine, observation, log } = await controlsPage();
    const calls: string[] = [];
    const watermark = async () => {
      calls.push(String(await log()));
    };
    await expect(
      engine.act(
        { revision: observation.revision, element: ref(observation, 'Locked'), action: 'click' },
        { ...limits(), beforeDispatch: watermark },
      ),
    ).rejects.toMatchObject({ code: 'action_not_allowed' });
    expect(calls).toEqual([]);
    const refusal = new Error('no watermark');
    await expect(
      engine.act(
        { revision: observation.revision, element: ref(observation, 'Save'), action: 'click' },
        {
          ...limits(),
          beforeDispatch: async () => {
            throw refusal;
          },
        },
      ),
    ).rejects.toBe(refusal);
    expect(await log()).toBe('nothing yet');
    const acted = await engine.act(
      { revision: observation.revision, element: ref(observation, 'Save'), action: 'click' },
      { ...limits(), beforeDispatch: watermark },
    );
    expect(calls).toEqual(['nothing yet']);
    expect(acted.observation.text).toMatch(/saving|saved/);
  });

  it('fills, presses, selects, checks and unchecks, each returning the settled page', async () => {
    const { engine, observation } = await controlsPage();
    let current = observation;
    const step = async (
      name: string,
      action: 'fill' | 'press' | 'select' | 'check' | 'uncheck',
      text?: string,
    ) => {
      const args = {
        revision: current.revision,
        element: ref(current, name),
        action,
        ...(text ? { text } : {}),
      };
      current = (await engine.act(args, limits())).observation;
      expect(current.settle?.result).toBe('dom_quiet');
      return current.elements.find((element) => element.name === name)?.state;
    };
    expect(await step('Name', 'fill', 'Ada')).toEqual({ value: 'Ada' });
    await step('Name', 'press', 'Enter');
    expect(current.text).toContain('submitted Ada');
    expect(await step('Colour', 'select', 'Green')).toEqual({ value: 'Green' });
    expect(await step('Colour', 'select', 'r')).toEqual({ value: 'Red' });
    expect(await step('Agree', 'check')).toEqual({ checked: true });
    expect(await step('Agree', 'uncheck')).toEqual({ checked: false });
  });
});

describe('postconditions and wait_for (ADR-0159)', () => {
  it('reports satisfied when the awaited control appears after the action', async () => {
    const { engine, observation } = await controlsPage();
    const { observation: after } = await engine.act(
      {
        revision: observation.revision,
        element: ref(observation, 'Save'),
        action: 'click',
        postcondition: { role: 'button', name: 'Saved', disabled: true },
      },
      limits(),
    );
    expect(after.condition).toMatchObject({ result: 'satisfied', scope: 'observation_window' });
    expect(after.condition?.observations).toBeGreaterThanOrEqual(1);
    expect(after.elements.some((element) => element.name === 'Saved')).toBe(true);
  });

  it('reports ambiguous for two buttons of the same role and name', async () => {
    const { engine } = await harness.engine();
    await engine.navigate({ url: harness.url('/pages/twins.html') }, limits());
    const { observation } = await engine.observe(
      { wait_for: { role: 'button', name: 'Delete', wait_ms: 0 } },
      limits(),
    );
    expect(observation.condition).toEqual({
      result: 'ambiguous',
      scope: 'observation_window',
      observations: 1,
      elapsed_ms: expect.any(Number),
    });
  });

  it('reports not_observed after a bounded number of reads within wait_ms when the predicate never holds', async () => {
    const { engine } = await harness.engine();
    await engine.navigate({ url: harness.url('/pages/controls.html') }, limits());
    const started = Date.now();
    const { observation } = await engine.observe(
      { wait_for: { role: 'button', name: 'Never there', wait_ms: 1_000 } },
      limits(),
    );
    const tookMs = Date.now() - started;
    expect(observation.condition?.result).toBe('not_observed');
    // The first read, then polls at least 250 ms apart starting before 1,000 ms: at most 4 more.
    expect(observation.condition?.observations).toBeGreaterThanOrEqual(2);
    expect(observation.condition?.observations).toBeLessThanOrEqual(4);
    expect(observation.condition?.elapsed_ms).toBeGreaterThanOrEqual(500);
    expect(observation.condition?.elapsed_ms).toBeLessThan(2_500);
    expect(tookMs).toBeLessThan(3_000);
  });

  it('never reads more than 21 times, even with the longest wait', async () => {
    const { engine } = await harness.engine();
    await engine.navigate({ url: harness.url('/pages/twins.html') }, limits());
    const { observation } = await engine.observe(
      { wait_for: { role: 'button', name: 'Never there', wait_ms: 5_000 } },
      limits(),
    );
    expect(observation.condition?.result).toBe('not_observed');
    expect(observation.condition?.observations).toBeLessThanOrEqual(21);
    expect(observation.condition?.observations).toBeGreaterThanOrEqual(5);
    expect(observation.condition?.elapsed_ms).toBeLessThan(6_500);
  });

  it('stops reading at the caller deadline', async () => {
    const { engine } = await harness.engine();
    await engine.navigate({ url: harness.url('/pages/twins.html') }, limits());
    const { observation } = await engine.observe(
      { wait_for: { role: 'button', name: 'Never there', wait_ms: 5_000 } },
      limits(1_000),
    );
    expect(observation.condition?.result).toBe('not_observed');
    expect(observation.condition?.elapsed_ms).toBeLessThan(1_500);
  });

  it('refuses wait_for together with continuation', async () => {
    const { engine } = await harness.engine();
    const { observation } = await engine.navigate({ url: harness.url('/pages/many-visible.html') }, limits());
    await expect(
      engine.observe(
        {
          continuation: observation.window.continuation ?? 'x',
          wait_for: { role: 'button', name: 'Item 300' },
        },
        limits(),
      ),
    ).rejects.toMatchObject({ code: 'invalid_arguments' });
  });
});
