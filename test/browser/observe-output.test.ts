import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { PageEngine, ToolOutcome } from '../../libs/browser/index.js';
import {
  candidateBoundPage,
  edgePage,
  longTextPage,
  namesPage,
  page5000,
  shadowPage5000,
} from '../fixtures/observation-pages.js';
import { PageServer } from '../fixtures/page-server.js';
import { EngineHarness, limits } from './harness.js';

/**
 * The page agent is made faster, never different. Each page's observation is pinned
 * byte for byte (aside from the random revision and the servers' ports), so any change to what a
 * model or the loop breaker (whose evidence key is a hash of these fields) sees fails here before
 * it reaches a bench figure.
 */
const harness = new EngineHarness();
let child: PageServer;

beforeAll(async () => {
  await harness.start();
  child = await PageServer.start();
  harness.server.addPage('pin-5000.html', page5000());
  harness.server.addPage('pin-shadow-5000.html', shadowPage5000());
  harness.server.addPage('pin-edges.html', edgePage());
  harness.server.addPage('pin-bound.html', candidateBoundPage());
  harness.server.addPage('pin-names.html', namesPage());
  harness.server.addPage('pin-long-text.html', longTextPage());
  child.addPage(
    'pin-child.html',
    `<!doctype html><title>Child</title><p>Inside the child frame</p>
     <input aria-label="Coupon" value="SPRING"><button type="button">Apply</button>`,
  );
  harness.server.addPage(
    'pin-parent.html',
    `<!doctype html><title>Parent</title><button type="button">Before</button>
     <iframe src="${child.otherOrigin}/pages/pin-child.html" style="width:400px;height:200px"></iframe>
     <button type="button">After</button>`,
  );
});
afterAll(async () => {
  await harness.stop();
  await child?.close();
});
afterEach(() => harness.cleanup());

/** The observation as text, revision and ports replaced; one element a line, so diffs read. */
function pinned({ observation }: ToolOutcome): string {
  const { revision, elements, window, ...rest } = observation;
  const continuation = window.continuation?.replace(revision, '<revision>') ?? null;
  const lines = [
    JSON.stringify({ ...rest, window: { ...window, continuation } }, null, 1),
    ...elements.map((element) => JSON.stringify(element)),
  ];
  return `${lines.join('\n')}\n`
    .replaceAll(`:${harness.server.port}/`, ':<port>/')
    .replaceAll(`:${child.port}/`, ':<child port>/');
}

async function observed(path: string, options: Parameters<EngineHarness['engine']>[0] = {}) {
  const { engine } = await harness.engine(options);
  await engine.navigate({ url: harness.url(path) }, limits());
  return { engine, first: await engine.observe({}, limits()) };
}

async function next(engine: PageEngine, previous: ToolOutcome): Promise<ToolOutcome> {
  const continuation = previous.observation.window.continuation;
  if (continuation === null) throw new Error('the window has no continuation');
  return engine.observe({ continuation }, limits());
}

const SNAPSHOTS = './__snapshots__/observe-output';

describe('observations are pinned byte for byte', () => {
  it.each(['below-fold', 'controls', 'every-control', 'hidden-controls', 'link', 'twins', 'with-frame'])(
    'keeps the observation of the fixture page %s',
    async (name) => {
      const { first } = await observed(`/pages/${name}.html`);
      await expect(pinned(first)).toMatchFileSnapshot(`${SNAPSHOTS}/${name}.txt`);
    },
  );

  it('keeps every window of a page with more visible elements than one window', async () => {
    const { engine, first } = await observed('/pages/many-visible.html');
    const second = await next(engine, first);
    const third = await next(engine, second);
    await expect([first, second, third].map(pinned).join('\n')).toMatchFileSnapshot(
      `${SNAPSHOTS}/many-visible.txt`,
    );
  });

  it('keeps both windows of the bench page of 5,000 nodes', async () => {
    const { engine, first } = await observed('/pages/pin-5000.html');
    const second = await next(engine, first);
    await expect([first, second].map(pinned).join('\n')).toMatchFileSnapshot(`${SNAPSHOTS}/bench-5000.txt`);
  });

  it('keeps both windows of the bench page with half its sections in shadow roots', async () => {
    const { engine, first } = await observed('/pages/pin-shadow-5000.html');
    const second = await next(engine, first);
    await expect([first, second].map(pinned).join('\n')).toMatchFileSnapshot(
      `${SNAPSHOTS}/bench-shadow-5000.txt`,
    );
  });

  it('keeps the edges of visibility, naming, state and secrets', async () => {
    const { first } = await observed('/pages/pin-edges.html');
    await expect(pinned(first)).toMatchFileSnapshot(`${SNAPSHOTS}/edges.txt`);
  });

  it('keeps the names of links, buttons and headings named every way', async () => {
    const { first } = await observed('/pages/pin-names.html');
    await expect(pinned(first)).toMatchFileSnapshot(`${SNAPSHOTS}/names.txt`);
  });

  it('keeps the text of a page with far more of it than the bound, mostly white space', async () => {
    const { first } = await observed('/pages/pin-long-text.html');
    await expect(pinned(first)).toMatchFileSnapshot(`${SNAPSHOTS}/long-text.txt`);
  });

  it('keeps a page whose candidates pass the bound', async () => {
    const { first } = await observed('/pages/pin-bound.html');
    await expect(pinned(first)).toMatchFileSnapshot(`${SNAPSHOTS}/candidate-bound.txt`);
  });

  it('keeps a page with a frame of another allowed origin inlined', async () => {
    const { first } = await observed('/pages/pin-parent.html', { frameOrigins: [child.otherOrigin] });
    await expect(pinned(first)).toMatchFileSnapshot(`${SNAPSHOTS}/cross-origin-frame.txt`);
  });
});
