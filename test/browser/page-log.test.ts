import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PAGE_LOG_LIMIT } from '../../libs/contracts/index.js';
import { EngineHarness, limits, ref } from './harness.js';

/**
 * What a page reports while a navigate or an act runs, kept beside the call's answer for the run
 * page: console errors and failed requests, bounded, without query strings, secrets struck.
 */
const harness = new EngineHarness();

beforeAll(async () => {
  await harness.start();
  harness.server.addPage(
    'logs-on-load.html',
    `<!doctype html><title>Logs</title><h1>Logs</h1>
<script>
  console.log('just talking');
  console.error('checkout failed at ' + location.origin + '/pay?card=4111 for hunter22');
  fetch('/missing/thing?token=abc123').catch(() => undefined);
  setTimeout(() => { throw new TypeError('price is undefined'); }, 0);
</script>`,
  );
  harness.server.addPage(
    'logs-on-click.html',
    `<!doctype html><title>Noisy</title>
<button type="button" onclick="for (let i = 0; i < 25; i += 1) console.error('noise ' + i)">Make noise</button>`,
  );
});
afterAll(() => harness.stop());
afterEach(() => harness.cleanup());

describe('the page log of a call', () => {
  it('keeps a navigation’s console errors, uncaught exceptions and failed requests, without queries or declared secrets', async () => {
    const { engine } = await harness.engine();
    engine.useSecrets([{ name: 'pw', value: 'hunter22', origins: [harness.server.origin] }]);
    const outcome = await engine.navigate({ url: harness.url('/pages/logs-on-load.html') }, limits());
    const log = outcome.pageLog;
    expect(log?.console_errors).toEqual(
      expect.arrayContaining([
        {
          text: `checkout failed at ${harness.server.origin}/pay for [secret:pw]`,
          url: harness.url('/pages/logs-on-load.html'),
        },
        { text: 'Uncaught TypeError: price is undefined', url: harness.url('/pages/logs-on-load.html') },
      ]),
    );
    expect(log?.failed_requests).toContainEqual({
      method: 'GET',
      url: harness.url('/missing/thing'),
      status: 404,
      failure: null,
    });
    expect(JSON.stringify(log)).not.toMatch(/abc123|4111|hunter22|just talking/);
  });

  it(`keeps at most ${PAGE_LOG_LIMIT} console errors of an act and counts the rest; an observe keeps none`, async () => {
    const { engine } = await harness.engine();
    const page = await engine.navigate({ url: harness.url('/pages/logs-on-click.html') }, limits());
    expect(page.pageLog?.console_errors).toEqual([]);
    const acted = await engine.act(
      {
        revision: page.observation.revision,
        element: ref(page.observation, 'Make noise'),
        action: 'click',
      },
      limits(),
    );
    expect(acted.pageLog?.console_errors.map((error) => error.text)).toEqual(
      Array.from({ length: PAGE_LOG_LIMIT }, (_, i) => `noise ${i}`),
    );
    expect(acted.pageLog?.console_errors_dropped).toBe(25 - PAGE_LOG_LIMIT);
    expect((await engine.observe({}, limits())).pageLog).toBeUndefined();
  });
});
