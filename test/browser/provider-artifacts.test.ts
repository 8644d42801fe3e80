import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BrowserToolExecutor } from '../../libs/runtime/browser-executor.js';
import { LeaseRig, RIG_TENANT } from '../fixtures/lease-rig.js';
import { PRESS_PAGE, pressButton } from '../fixtures/press-site.js';
import { uniquePrefix } from '../fixtures/redis.js';

/**
 * The run side: the screenshot the browser worker names beside navigate and act reaches
 * the run through the provider and the browser executor, handed over once (never to the model).
 */
describe('screenshots on the run side', () => {
  let rig: LeaseRig;

  beforeAll(async () => {
    rig = await LeaseRig.start({
      prefix: uniquePrefix('prov-shots'),
      principal: 'owner',
      profileIds: 'shots',
      page: PRESS_PAGE,
    });
  });

  afterAll(async () => {
    await rig?.close();
  });

  const context = (n: number) => ({
    invocationId: `run_shots:a1:s${n}:0`,
    deadlineMs: Date.now() + 20_000,
    signal: new AbortController().signal,
    beforeDispatch: async () => undefined,
  });

  it('hands over the settled page’s screenshot of navigate and act once, and none for observe', async () => {
    const profileId = await rig.newProfile();
    const provider = rig.provider(profileId, 'run_shots', {});
    const tools = new BrowserToolExecutor(provider, Date.now() + 10 * 60_000);
    const navigated = await tools.execute(
      { id: 'c1', name: 'browser.navigate', args: { url: `${rig.origin}/one` } },
      context(1),
    );
    expect(navigated.ok).toBe(true);
    const shot = tools.takeArtifacts().screenshot;
    expect(shot).toMatch(/^shot-[A-Za-z0-9_-]+\.jpg$/);
    expect(tools.takeArtifacts()).toEqual({});
    // The model's result carries the observation only, never the artifact's name.
    expect(JSON.stringify(navigated)).not.toContain(shot);
    // DESIGN §12: the screenshot is taken after the answer; it is stored soon after.
    await expect
      .poll(
        async () =>
          (
            await rig.worker.handle.artifacts.get({
              tenant: RIG_TENANT,
              runId: 'run_shots',
              name: shot ?? '',
            })
          )?.contentType,
        { timeout: 15_000 },
      )
      .toBe('image/jpeg');

    const observation = (navigated as { result: { observation: Parameters<typeof pressButton>[0] } }).result
      .observation;
    const acted = await tools.execute(
      {
        id: 'c2',
        name: 'browser.act',
        args: { revision: observation.revision, element: pressButton(observation).ref, action: 'click' },
      },
      context(2),
    );
    expect(acted.ok).toBe(true);
    const actShot = tools.takeArtifacts().screenshot;
    expect(actShot).toMatch(/^shot-/);
    expect(actShot).not.toBe(shot);

    const observed = await tools.execute({ id: 'c3', name: 'browser.observe', args: {} }, context(3));
    expect(observed.ok).toBe(true);
    expect(tools.takeArtifacts()).toEqual({});
    await provider.close({ seal: false });
  });
});
