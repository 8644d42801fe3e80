import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { navigateArgsSchema } from '../../libs/contracts/index.js';
import { BrowserLeaseProvider, executeBrowserTool } from '../../libs/provider/index.js';
import { PageServer } from '../fixtures/page-server.js';
import { FenceRig, limits } from './page-fence-rig.js';

/** URLs that are no web page are bad arguments, refused before dispatch. */
const NOT_WEB_PAGES = [
  'file:///etc/passwd',
  'chrome://settings',
  'javascript:alert(document.cookie)',
  'data:text/html,<h1>hi</h1>',
  'about:blank',
  'about:config',
  'view-source:http://127.0.0.1/',
  'blob:http://127.0.0.1/0b0c',
  'ftp://127.0.0.1/file',
];

const rig = new FenceRig();
beforeAll(() => rig.start());
afterAll(() => rig.stop());
afterEach(() => rig.cleanup());

describe('navigating to a URL that is no web page', () => {
  it('is refused invalid_arguments by the page engine before dispatch, and the page stays', async () => {
    const { engine, page } = await rig.engine();
    await engine.navigate({ url: rig.site.url('/pages/second.html') }, limits());
    for (const url of NOT_WEB_PAGES) {
      let dispatched = false;
      const beforeDispatch = async () => {
        dispatched = true;
      };
      await expect(engine.navigate({ url }, { ...limits(), beforeDispatch }), url).rejects.toMatchObject({
        code: 'invalid_arguments',
      });
      expect(dispatched, url).toBe(false);
    }
    expect(page.url()).toBe(rig.site.url('/pages/second.html'));
    // The page still answers: nothing was lost.
    const { observation } = await engine.observe({}, limits());
    expect(observation.url).toBe(rig.site.url('/pages/second.html'));
  });

  it('is refused by the tool contract, so the run side sends nothing and keeps its lease', async () => {
    // A real provider whose data plane is a local server that counts what reaches it.
    const dataPlane = await PageServer.start();
    try {
      const provider = new BrowserLeaseProvider({
        scope: { tenant: 't1', principal: 'p', run_id: 'run-schemes', attempt: 1 },
        profileId: 'shop',
        token: 'token',
        findWorker: async () => ({ id: 'w1', url: dataPlane.origin }),
      });
      let dispatched = 0;
      for (const url of NOT_WEB_PAGES) {
        await expect(
          executeBrowserTool(
            provider,
            'browser.navigate',
            { url },
            {
              invocationId: `run-schemes:1:${url.length}`,
              requestedLeaseExpiresAtMs: Date.now() + 600_000,
              deadlineMs: Date.now() + 5_000,
            },
            {
              beforeDispatch: () => {
                dispatched += 1;
              },
            },
          ),
          url,
        ).rejects.toMatchObject({ code: 'invalid_arguments' });
      }
      expect(dispatched).toBe(0);
      expect(dataPlane.log).toEqual([]);
    } finally {
      await dataPlane.close();
    }
    for (const url of NOT_WEB_PAGES) expect(navigateArgsSchema.safeParse({ url }).success, url).toBe(false);
    expect(navigateArgsSchema.safeParse({ url: 'https://example.com/a?b#c' }).success).toBe(true);
  });
});
