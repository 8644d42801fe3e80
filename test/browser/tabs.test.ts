import { type ChildProcess, spawn } from 'node:child_process';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MAX_TABS_PER_LEASE } from '../../libs/contracts/index.js';
import { click, EngineHarness, limits, ref } from './harness.js';

const harness = new EngineHarness();
beforeAll(async () => {
  await harness.start();
  harness.server.addPage(
    'tab-opener.html',
    `<!doctype html><title>Opener</title><p>First tab</p>
     <a href="/pages/tab-second.html" target="_blank">Open the second</a>
     <button type="button" onclick="window.open('/pages/tab-second.html')">Open by script</button>`,
  );
  harness.server.addPage(
    'tab-second.html',
    `<!doctype html><title>Second</title><p id="log">second tab</p>
     <button type="button" onclick="fetch('/api/slow?label=from-second').then(() => { document.getElementById('log').textContent = 'sent from second'; })">Send</button>
     <button type="button" onclick="window.close()">Close this tab</button>`,
  );
  harness.server.addPage(
    'tab-chain.html',
    `<!doctype html><title>Chain</title>
     <script>document.title = 'Chain ' + new URLSearchParams(location.search).get('n');</script>
     <button type="button" onclick="const n = Number(new URLSearchParams(location.search).get('n')) + 1; window.open('/pages/tab-chain.html?n=' + n)">Open the next</button>`,
  );
  harness.server.addPage(
    'tab-slow.html',
    `<!doctype html><title>Slow opener</title>
     <a href="/pages/tab-second.html?delay=6000" target="_blank">Open a slow tab</a>
     <a href="/pages/tab-second.html?delay=9000" target="_blank">Open a slower tab</a>`,
  );
  harness.server.addPage(
    'tab-away.html',
    `<!doctype html><title>Away</title>
     <a href="${harness.server.otherOrigin}/pages/second.html" target="_blank">Leave</a>`,
  );
});
afterAll(() => harness.stop());
afterEach(() => harness.cleanup());

describe('tabs', () => {
  it('makes a target=_blank tab on an allowed origin current, and acts there as an ordinary effect', async () => {
    const { engine, page } = await harness.engine();
    const first = (await engine.navigate({ url: harness.url('/pages/tab-opener.html') }, limits()))
      .observation;
    expect(first.tabs).toBeUndefined();

    const opened = await click(engine, first, 'Open the second');
    expect(opened.tabs).toEqual({ count: 2, index: 1, event: 'opened' });
    expect(opened.url).toBe(harness.url('/pages/tab-second.html'));
    expect(opened.title).toBe('Second');
    expect(opened.settle).not.toBeNull();
    expect(engine.page).not.toBe(page);

    // The first tab's revision is void: the new tab was observed under a new one.
    await expect(
      engine.act(
        { revision: first.revision, element: ref(first, 'Open by script'), action: 'click' },
        limits(),
      ),
    ).rejects.toMatchObject({ code: 'page_changed' });

    const watermarks: string[] = [];
    const sent = await engine.act(
      { revision: opened.revision, element: ref(opened, 'Send'), action: 'click' },
      {
        ...limits(),
        beforeDispatch: async () => {
          watermarks.push('before');
        },
      },
    );
    expect(watermarks).toEqual(['before']);
    expect(harness.server.log.filter((entry) => entry.path === '/api/slow?label=from-second')).toHaveLength(
      1,
    );
    expect(sent.observation.text).toContain('sent from second');
    // Nothing changed since the tab opened: the count stays, the event was told once.
    expect(sent.observation.tabs).toEqual({ count: 2, index: 1, event: null });
  });

  it('returns to the previous tab when the current one closes itself, and says so once', async () => {
    const { engine } = await harness.engine();
    const first = (await engine.navigate({ url: harness.url('/pages/tab-opener.html') }, limits()))
      .observation;
    const opened = await click(engine, first, 'Open by script');
    expect(opened.tabs).toEqual({ count: 2, index: 1, event: 'opened' });

    const closed = await click(engine, opened, 'Close this tab');
    expect(closed.url).toBe(harness.url('/pages/tab-opener.html'));
    expect(closed.title).toBe('Opener');
    expect(closed.tabs).toEqual({ count: 1, index: 0, event: 'closed' });

    const again = await engine.observe({}, limits());
    expect(again.observation.tabs).toBeUndefined();
    // The first tab acts again under its new revision.
    const reopened = await click(engine, again.observation, 'Open the second');
    expect(reopened.tabs?.event).toBe('opened');
  });

  it('returns to the previous tab when the current one crashes', async () => {
    const { engine, page } = await harness.engine();
    const first = (await engine.navigate({ url: harness.url('/pages/tab-opener.html') }, limits()))
      .observation;
    await click(engine, first, 'Open the second');
    const crashed = engine.page;
    expect(crashed).not.toBe(page);
    const session = await crashed.context().newCDPSession(crashed);
    await session.send('Page.crash').catch(() => undefined);
    await expect.poll(() => engine.page).toBe(page);
    const after = (await engine.observe({}, limits())).observation;
    expect(after.title).toBe('Opener');
    expect(after.tabs).toEqual({ count: 1, index: 0, event: 'closed' });
    expect(crashed.isClosed()).toBe(true);
  });

  it(`keeps at most ${MAX_TABS_PER_LEASE} tabs, closing the oldest when one more opens`, async () => {
    const { engine, page } = await harness.engine();
    let current = (await engine.navigate({ url: harness.url('/pages/tab-chain.html?n=1') }, limits()))
      .observation;
    for (let n = 2; n <= MAX_TABS_PER_LEASE + 1; n += 1) {
      current = await click(engine, current, 'Open the next');
      expect(current.title).toBe(`Chain ${n}`);
      expect(current.tabs).toEqual({
        count: Math.min(n, MAX_TABS_PER_LEASE),
        index: Math.min(n, MAX_TABS_PER_LEASE) - 1,
        event: 'opened',
      });
    }
    await expect.poll(() => page.isClosed()).toBe(true);
    const titles = await Promise.all(
      page
        .context()
        .pages()
        .map((open) => open.title()),
    );
    expect(titles.sort()).toEqual(['Chain 2', 'Chain 3', 'Chain 4', 'Chain 5']);
  });

  it('still closes a target=_blank tab to a disallowed origin and counts it, staying on the page', async () => {
    const { engine, page } = await harness.engine();
    const first = (await engine.navigate({ url: harness.url('/pages/tab-away.html') }, limits())).observation;
    const after = await click(engine, first, 'Leave');
    expect(after.blocked?.popups).toBe(1);
    expect(after.tabs).toBeUndefined();
    expect(after.title).toBe('Away');
    expect(engine.page).toBe(page);
    await expect.poll(() => page.context().pages()).toEqual([page]);
    expect(harness.server.hitsOn(`localhost:${harness.server.port}`)).toEqual([]);
  });
});

/** Two child processes spinning on the machine's cores for as long as a test runs; killed after. */
function busyCores(count: number): { stop: () => void } {
  const children: ChildProcess[] = [];
  for (let index = 0; index < count; index += 1) {
    children.push(spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
  }
  return {
    stop: () => {
      for (const child of children) child.kill('SIGKILL');
    },
  };
}

describe('tabs announced during an act', () => {
  it('waits for an announced tab past five seconds, inside the act deadline, and answers with it current', async () => {
    const { engine } = await harness.engine();
    const first = (await engine.navigate({ url: harness.url('/pages/tab-slow.html') }, limits())).observation;
    const opened = await click(engine, first, 'Open a slow tab');
    expect(opened.title).toBe('Second');
    expect(opened.tabs).toEqual({ count: 2, index: 1, event: 'opened' });
  }, 30_000);

  it('says tabs.pending when the announced tab has not committed by the deadline, and tells the switch on the next call', async () => {
    const { engine } = await harness.engine();
    const first = (await engine.navigate({ url: harness.url('/pages/tab-slow.html') }, limits())).observation;
    const acted = await engine.act(
      { revision: first.revision, element: ref(first, 'Open a slower tab'), action: 'click' },
      limits(4_000),
    );
    expect(acted.observation.title).toBe('Slow opener');
    expect(acted.observation.tabs).toEqual({ count: 1, index: 0, event: null, pending: 1 });
    // The next call waits for the tab the act announced, and says it opened.
    const next = (await engine.observe({}, limits(15_000))).observation;
    expect(next.title).toBe('Second');
    expect(next.tabs).toEqual({ count: 2, index: 1, event: 'opened' });
  }, 30_000);
});

describe('tabs under load', () => {
  it('answers a target=_blank click with the new tab current, 10 of 10 times, while both cores are busy', async () => {
    const busy = busyCores(2);
    try {
      const { engine } = await harness.engine();
      let current = (await engine.navigate({ url: harness.url('/pages/tab-opener.html') }, limits()))
        .observation;
      const answers: string[] = [];
      for (let attempt = 0; attempt < 10; attempt += 1) {
        const opened = await click(engine, current, 'Open the second');
        answers.push(`${opened.title}:${opened.tabs?.event ?? 'none'}:${opened.tabs?.pending ?? 0}`);
        // Back on the opener for the next try: the new tab closes itself.
        current = opened.title === 'Second' ? await click(engine, opened, 'Close this tab') : opened;
        if (current.title !== 'Opener') current = (await engine.observe({}, limits())).observation;
      }
      expect(answers).toEqual(Array.from({ length: 10 }, () => 'Second:opened:0'));
    } finally {
      busy.stop();
    }
  }, 120_000);
});
