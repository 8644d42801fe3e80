import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EngineHarness, limits, ref } from './harness.js';

const harness = new EngineHarness();
beforeAll(() => harness.start());
afterAll(() => harness.stop());
afterEach(() => harness.cleanup());

describe('ADR-0130 d8: the observation checks at most 4,096 candidates', () => {
  it('stops at the 4,096th candidate of a page with 5,000 hidden controls: a control past them is not seen', async () => {
    const hidden = '<button hidden>Hidden</button>'.repeat(5_000);
    const url = harness.server.addPage(
      'many-candidates.html',
      `<!doctype html><title>many</title><button>Early</button>${hidden}<button>Past the limit</button>`,
    );
    const { engine } = await harness.engine();
    const { observation } = await engine.navigate({ url }, limits());

    expect(observation.window).toMatchObject({ candidates_checked: 4_096, candidate_limit_reached: true });
    expect(observation.elements.map((element) => element.name)).toEqual(['Early']);
  });
});

describe('ADR-0159: what an act may and may not do after dispatch', () => {
  it('ends an act whose page cannot be read afterwards outcome_unknown, and the click did happen', async () => {
    // The click itself leaves the page unreadable: the action ran (the server saw it), then the
    // page's one thread spins past the call's deadline, so no observation of the settled page can be taken in time. The
    // page script runs in an isolated world, so patching prototypes no longer breaks a read.
    const url = harness.server.addPage(
      'evidence-lost.html',
      `<!doctype html><title>lost</title>
      <button onclick="fetch('/api/slow?label=evidence-lost').finally(() => { const end = Date.now() + 5000; while (Date.now() < end) {} })">Break</button>`,
    );
    const { engine } = await harness.engine();
    const { observation } = await engine.navigate({ url }, limits());
    const clicks = () =>
      harness.server.log.filter((entry) => entry.path.includes('label=evidence-lost')).length;

    await expect(
      engine.act(
        { revision: observation.revision, element: ref(observation, 'Break'), action: 'click' },
        limits(3_000),
      ),
    ).rejects.toMatchObject({ name: 'BrowserToolError', code: 'outcome_unknown' });
    expect(clicks()).toBe(1);
  });

  it('never sends the action again when its postcondition is not met: the server sees one request', async () => {
    const url = harness.server.addPage(
      'send-once.html',
      `<!doctype html><title>send</title>
      <button onclick="fetch('/api/slow?label=sent-once')">Send</button>`,
    );
    const { engine } = await harness.engine();
    const { observation } = await engine.navigate({ url }, limits());
    const sends = () => harness.server.log.filter((entry) => entry.path.includes('label=sent-once')).length;

    const { observation: after } = await engine.act(
      {
        revision: observation.revision,
        element: ref(observation, 'Send'),
        action: 'click',
        postcondition: { role: 'button', name: 'Sent', wait_ms: 1_000 },
      },
      limits(),
    );

    expect(after.condition?.result).toBe('not_observed');
    expect(after.condition?.observations).toBeGreaterThanOrEqual(2);
    expect(sends()).toBe(1);
  });
});
