import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EngineHarness, limits } from './harness.js';

const harness = new EngineHarness();
beforeAll(() => harness.start());
afterAll(() => harness.stop());
afterEach(() => harness.cleanup());

/** Requests that reached the server under the disallowed origin's Host header. */
const disallowedHits = () => harness.server.hitsOn(`localhost:${harness.server.port}`);

describe('the origin guard (DESIGN §6)', () => {
  it('refuses a typed navigation to a disallowed origin before any request leaves', async () => {
    const { engine, page } = await harness.engine();
    await expect(
      engine.navigate({ url: `${harness.server.otherOrigin}/pages/link.html` }, limits()),
    ).rejects.toMatchObject({ code: 'url_disallowed' });
    await expect(engine.navigate({ url: 'file:///etc/passwd' }, limits())).rejects.toMatchObject({
      code: 'invalid_arguments',
    });
    expect(disallowedHits()).toEqual([]);
    expect(page.url()).toBe('about:blank');
  });

  it('blocks a redirect to a disallowed origin before its request leaves', async () => {
    const { engine, page } = await harness.engine();
    await engine.navigate({ url: harness.url('/pages/link.html') }, limits());
    const to = encodeURIComponent(`${harness.server.otherOrigin}/pages/second.html`);
    await expect(
      engine.navigate({ url: harness.url(`/api/redirect?to=${to}`) }, limits()),
    ).rejects.toMatchObject({ code: 'url_disallowed' });
    expect(harness.server.log.some((entry) => entry.path.startsWith('/api/redirect'))).toBe(true);
    expect(disallowedHits()).toEqual([]);
    expect(page.url()).not.toContain('localhost');
  });

  it('follows a redirect that stays inside the allowed origins', async () => {
    const { engine } = await harness.engine();
    const to = encodeURIComponent(harness.url('/pages/second.html'));
    const { observation } = await engine.navigate({ url: harness.url(`/api/redirect?to=${to}`) }, limits());
    expect(observation.url).toBe(harness.url('/pages/second.html'));
  });

  it('blocks a navigation started by page script during an action, and the page stays', async () => {
    const { engine, page } = await harness.engine();
    const { observation } = await engine.navigate({ url: harness.url('/pages/controls.html') }, limits());
    const leave = observation.elements.find((element) => element.name === 'Leave');
    await expect(
      engine.act({ revision: observation.revision, element: leave?.ref ?? '', action: 'click' }, limits()),
    ).rejects.toMatchObject({ code: 'url_disallowed' });
    expect(disallowedHits()).toEqual([]);
    expect(page.url()).toBe(harness.url('/pages/controls.html'));
    const after = await engine.observe({}, limits());
    expect(after.observation.title).toBe('Controls');
  });
});
