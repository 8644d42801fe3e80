import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FenceRig, limits, refOf, sleep } from './page-fence-rig.js';

const rig = new FenceRig();
beforeAll(() => rig.start());
afterAll(() => rig.stop());
afterEach(() => rig.cleanup());

/** Serves `body` on the allowed site and navigates a fresh engine there. */
async function open(name: string, body: string, options: Parameters<FenceRig['engine']>[0] = {}) {
  const url = rig.site.addPage(
    name,
    `<!doctype html><html><head><title>${name}</title></head><body>${body}</body></html>`,
  );
  const opened = await rig.engine(options);
  const { observation } = await opened.engine.navigate({ url }, limits());
  return { ...opened, observation };
}

async function click(
  opened: Awaited<ReturnType<typeof open>>,
  name: string,
): Promise<Awaited<ReturnType<Awaited<ReturnType<typeof open>>['engine']['act']>>> {
  return opened.engine.act(
    { revision: opened.observation.revision, element: refOf(opened.observation, name), action: 'click' },
    limits(),
  );
}

describe('popups are fenced like the first page', () => {
  it('closes a window.open popup to a disallowed origin before it loads, and the act says so', async () => {
    const away = `${rig.elsewhere.origin}/pages/second.html`;
    const opened = await open(
      'popup-script.html',
      `<button type="button" onclick="window.open('${away}')">Open</button>`,
    );
    const { observation } = await click(opened, 'Open');
    // Nothing but time can show a request that never comes: an unfenced popup would ask the
    // disallowed origin for its page within milliseconds of the click; 300 ms allows for a loaded machine.
    await sleep(300);
    expect(rig.elsewhereHits).toBe(0);
    expect(observation.blocked).toEqual({ popups: 1, frames: 0, subresources: 0 });
    // Closed, however slow the browser is to say so (a fixed sleep failed under load).
    await expect.poll(() => opened.context.pages()).toEqual([opened.page]);
    expect(rig.elsewhereHits).toBe(0);
  });

  it('closes a target=_blank link to a disallowed origin before it loads', async () => {
    const away = `${rig.elsewhere.origin}/pages/second.html`;
    const opened = await open('popup-link.html', `<a href="${away}" target="_blank">Away</a>`);
    const { observation } = await click(opened, 'Away');
    // Nothing but time can show a request that never comes: the link's new tab would ask the
    // disallowed origin within milliseconds of the click; 300 ms allows for a loaded machine.
    await sleep(300);
    expect(rig.elsewhereHits).toBe(0);
    expect(observation.blocked?.popups).toBe(1);
    // Closed, however slow the browser is to say so (a fixed sleep failed under load).
    await expect.poll(() => opened.context.pages()).toEqual([opened.page]);
    expect(rig.elsewhereHits).toBe(0);
  });

  it('closes a popup a page opens while loading, and the navigation says so', async () => {
    const away = `${rig.elsewhere.origin}/pages/second.html`;
    const opened = await open('popup-onload.html', `<p>Loaded</p><script>window.open('${away}')</script>`);
    // Nothing but time can show a request that never comes: the popup the page opened as it loaded
    // would have asked the disallowed origin within milliseconds; 300 ms allows for a loaded machine.
    await sleep(300);
    expect(rig.elsewhereHits).toBe(0);
    expect(opened.observation.blocked?.popups).toBe(1);
    // Closed, however slow the browser is to say so (a fixed sleep failed under load).
    await expect.poll(() => opened.context.pages()).toEqual([opened.page]);
    expect(rig.elsewhereHits).toBe(0);
  });

  it('keeps a popup to an allowed origin open and loaded', async () => {
    const opened = await open('popup-allowed.html', `<a href="/pages/second.html" target="_blank">Next</a>`);
    const { observation } = await click(opened, 'Next');
    expect(observation.blocked).toBeUndefined();
    await expect
      .poll(() => opened.context.pages().map((page) => page.url()))
      .toContain(rig.site.url('/pages/second.html'));
    expect(rig.elsewhereHits).toBe(0);
  });

  it('sends a form posted to a new window once, as a POST with its body, when its origin is allowed', async () => {
    const seen: string[] = [];
    const shop = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk) => {
        body += chunk;
      });
      request.on('end', () => {
        seen.push(`${request.method} ${request.url} ${body}`.trim());
        response.setHeader('content-type', 'text/html');
        response.end(
          request.url === '/'
            ? '<title>Form</title><form method="post" action="/pay" target="_blank"><input name="q" value="42"><button>Send</button></form>'
            : `<title>Got ${request.method}</title>`,
        );
      });
    });
    await new Promise<void>((resolve) => shop.listen(0, '127.0.0.1', resolve));
    try {
      const origin = `http://127.0.0.1:${(shop.address() as AddressInfo).port}`;
      const { engine, context } = await rig.engine({ allowedOrigins: [origin] });
      const { observation } = await engine.navigate({ url: `${origin}/` }, limits());
      await engine.act(
        { revision: observation.revision, element: refOf(observation, 'Send'), action: 'click' },
        limits(),
      );
      await expect.poll(() => Promise.all(context.pages().map((page) => page.title()))).toContain('Got POST');
      // (Chromium may also ask for a favicon, which is no part of the page's own traffic.)
      expect(seen.filter((entry) => !entry.includes('favicon'))).toEqual(['GET /', 'POST /pay q=42']);
    } finally {
      shop.close();
    }
  });

  it('blocks a popup to an allowed origin that redirects to a disallowed one', async () => {
    const to = encodeURIComponent(`${rig.elsewhere.origin}/pages/second.html`);
    const opened = await open(
      'popup-redirect.html',
      `<button type="button" onclick="window.open('/api/redirect?to=${to}')">Open</button>`,
    );
    await click(opened, 'Open');
    await expect.poll(() => rig.site.log.some((entry) => entry.path.startsWith('/api/redirect'))).toBe(true);
    // Nothing but time can show a request that never comes: the redirect has been answered, and a
    // popup that followed it would reach the disallowed origin within milliseconds; 500 ms is room.
    await sleep(500);
    expect(rig.elsewhereHits).toBe(0);
  });

  it('blocks a later navigation of an allowed popup to a disallowed origin', async () => {
    const away = `${rig.elsewhere.origin}/pages/second.html`;
    const opened = await open(
      'popup-later.html',
      `<button type="button" onclick="const w = window.open('/pages/second.html'); setTimeout(() => { w.location = '${away}'; }, 300)">Open</button>`,
    );
    // The popup may be the current tab by then, and a blocked navigation of the current page fails
    // the call (url_disallowed); either way nothing leaves.
    await click(opened, 'Open').catch((error: unknown) => {
      expect(error).toMatchObject({ code: 'url_disallowed' });
    });
    // Nothing but time can show a request that never comes: the page sends its popup away 300 ms
    // after opening it; a second covers that delay and the navigation, which must not arrive.
    await sleep(1_000);
    expect(rig.elsewhereHits).toBe(0);
  });
});

describe('child frames follow the allowed origins and frame_origins', () => {
  it('blocks a frame to a disallowed origin before its request leaves', async () => {
    const opened = await open(
      'frame-away.html',
      `<iframe src="${rig.elsewhere.origin}/pages/frame-content.html" title="Away"></iframe>`,
    );
    expect(rig.elsewhereHits).toBe(0);
    expect(opened.observation.blocked?.frames).toBe(1);
  });

  it('blocks a frame whose allowed address redirects to a disallowed origin', async () => {
    const to = encodeURIComponent(`${rig.elsewhere.origin}/pages/frame-content.html`);
    await open('frame-redirect.html', `<iframe src="/api/redirect?to=${to}" title="Bounce"></iframe>`);
    // Nothing but time can show a request that never comes: the frame's redirect was answered as
    // the page loaded; 300 ms is room for a followed redirect to reach the disallowed origin.
    await sleep(300);
    expect(rig.site.log.some((entry) => entry.path.startsWith('/api/redirect'))).toBe(true);
    expect(rig.elsewhereHits).toBe(0);
  });

  it('lets a frame load from an origin the profile lists in frame_origins', async () => {
    const opened = await open(
      'frame-listed.html',
      `<iframe src="${rig.elsewhere.origin}/pages/frame-content.html" title="Embed"></iframe>`,
      { frameOrigins: [rig.elsewhere.origin] },
    );
    expect(opened.observation.blocked).toBeUndefined();
    expect(rig.elsewhere.log.map((entry) => entry.path)).toContain('/pages/frame-content.html');
  });
});

describe('a listed embed in its own process', () => {
  // `localhost` is another site than 127.0.0.1, so Chromium puts the embed in a process of its own.
  const embedOrigin = () => rig.elsewhere.otherOrigin;
  const elsewhereOn127 = () => rig.elsewhere.hitsOn(`127.0.0.1:${rig.elsewhere.port}`).length;

  it('cannot navigate itself to a disallowed origin', async () => {
    const embed = rig.elsewhere.addPage(
      'embed-leaves.html',
      `<p>Embed</p><script>setTimeout(() => { location.href = '${rig.elsewhere.origin}/pages/second.html'; }, 100)</script>`,
    );
    await open(
      'embed-host.html',
      `<iframe src="${embed.replace(rig.elsewhere.origin, embedOrigin())}" title="Embed"></iframe>`,
      {
        frameOrigins: [embedOrigin()],
      },
    );
    // Nothing but time can show a request that never comes: the embed sends itself away 100 ms after
    // it loads; 800 ms covers that delay and the navigation, which must not reach 127.0.0.1.
    await sleep(800);
    expect(rig.elsewhere.hitsOn(`localhost:${rig.elsewhere.port}`).length).toBeGreaterThan(0);
    expect(elsewhereOn127()).toBe(0);
  });

  it('cannot reach a disallowed origin through a redirect of its own navigation', async () => {
    const to = encodeURIComponent(`${rig.elsewhere.origin}/pages/second.html`);
    const embed = rig.elsewhere.addPage(
      'embed-bounces.html',
      `<p>Embed</p><script>setTimeout(() => { location.href = '/api/redirect?to=${to}'; }, 100)</script>`,
    );
    await open(
      'embed-host-2.html',
      `<iframe src="${embed.replace(rig.elsewhere.origin, embedOrigin())}" title="Embed"></iframe>`,
      {
        frameOrigins: [embedOrigin()],
      },
    );
    await expect
      .poll(() => rig.elsewhere.log.some((entry) => entry.path.startsWith('/api/redirect')))
      .toBe(true);
    // Nothing but time can show a request that never comes: the embed's redirect has been answered;
    // 500 ms is room for it to be followed to 127.0.0.1, which must not happen.
    await sleep(500);
    expect(elsewhereOn127()).toBe(0);
  });
  it('cannot load a frame of a disallowed origin inside itself, however early', async () => {
    const embed = rig.elsewhere.addPage(
      'embed-nests.html',
      `<p>Embed</p><iframe src="${rig.elsewhere.origin}/pages/second.html" title="Nested"></iframe>`,
    );
    const opened = await open(
      'embed-host-3.html',
      `<iframe src="${embed.replace(rig.elsewhere.origin, embedOrigin())}" title="Embed"></iframe>`,
      { frameOrigins: [embedOrigin()] },
    );
    await expect
      .poll(() => rig.elsewhere.hitsOn(`localhost:${rig.elsewhere.port}`).length)
      .toBeGreaterThan(0);
    // Nothing but time can show a request that never comes: the embed has loaded, and its nested
    // frame asks as it loads; 500 ms is room for that request, which must not reach 127.0.0.1.
    await sleep(500);
    expect(elsewhereOn127()).toBe(0);
    expect(opened.observation.blocked?.frames).toBe(1);
  });
});

describe('subresources', () => {
  const beacons = () => `
    <link rel="icon" href="${rig.elsewhere.origin}/api/no-content?kind=icon">
    <link rel="stylesheet" href="${rig.elsewhere.origin}/api/no-content?kind=css">
    <img src="${rig.elsewhere.origin}/api/no-content?kind=img" alt="">
    <script>
      fetch('${rig.elsewhere.origin}/api/poll?kind=fetch').catch(() => {});
      navigator.sendBeacon('${rig.elsewhere.origin}/api/no-content?kind=beacon', 'x');
      const xhr = new XMLHttpRequest(); xhr.open('GET', '${rig.elsewhere.origin}/api/poll?kind=xhr'); xhr.send();
      try { new WebSocket('${rig.elsewhere.origin.replace('http:', 'ws:')}/socket?kind=ws'); } catch {}
    </script>
    <img src="/api/redirect?to=${encodeURIComponent(`${rig.elsewhere.origin}/api/no-content?kind=hop`)}" alt="">`;

  it('are unrestricted by default, because real sites load from CDNs', async () => {
    await open('subresources-any.html', beacons());
    await expect.poll(() => rig.elsewhereHits).toBeGreaterThanOrEqual(5);
    expect(rig.elsewhere.log.map((entry) => entry.path)).toContain('/socket?kind=ws');
  });

  it('reach only allowed and frame origins when the profile says subresources: allowed_origins', async () => {
    const opened = await open('subresources-fenced.html', beacons(), { subresources: 'allowed_origins' });
    // Nothing but time can show a request that never comes: the page's links, images, fetches,
    // beacon and socket all go out as it loads; 500 ms is room for any to reach the disallowed origin.
    await sleep(500);
    expect(rig.elsewhereHits).toBe(0);
    expect(opened.observation.blocked?.subresources).toBeGreaterThanOrEqual(4);
  });

  it('reach a frame origin when subresources are fenced and that origin is listed', async () => {
    await open('subresources-listed.html', beacons(), {
      subresources: 'allowed_origins',
      frameOrigins: [rig.elsewhere.origin],
    });
    await expect.poll(() => rig.elsewhereHits).toBeGreaterThanOrEqual(5);
  });
});
