import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executeBrowserTool } from '../../libs/provider/index.js';
import { closedLoopbackPort } from '../fixtures/closed-port.js';
import {
  dispatchCounter,
  LeaseRig,
  profilePath,
  RIG_TENANT,
  rejection,
  toolCalls,
} from '../fixtures/lease-rig.js';
import { PRESS_PAGE } from '../fixtures/press-site.js';
import { uniquePrefix } from '../fixtures/redis.js';

/**
 * A navigation that never reached a server, through the browser worker's data plane and the run
 * side's provider (real Chromium, real Redis): `navigation_failed` with Chromium's error name, the
 * lease's sequence advanced and the lease kept.
 */
describe('navigation_failed through the data plane', () => {
  let rig: LeaseRig;
  let refused: string;

  beforeAll(async () => {
    const port = await closedLoopbackPort();
    refused = `http://127.0.0.1:${port}`;
    rig = await LeaseRig.start({
      prefix: uniquePrefix('navfail'),
      principal: 'owner',
      profileIds: 'navfail',
      page: PRESS_PAGE,
    });
  });
  afterAll(() => rig?.close());

  let profiles = 0;
  /** A profile allowing the site and the refused origin. */
  async function newProfile(): Promise<string> {
    profiles += 1;
    const id = `navfail-${profiles}`;
    await rig.admin.createProfile({
      id,
      tenant: RIG_TENANT,
      principal: 'owner',
      allowed_origins: [rig.origin, refused],
    });
    return id;
  }

  const call = toolCalls((n) => `run:navfail-${n}:0`, { timeoutMs: 20_000 });

  it('keeps the lease: the provider moves its sequence, the model is shown the error page, and the next navigate goes through', async () => {
    const profileId = await newProfile();
    const provider = rig.provider(profileId, 'run_navfail');
    const first = await executeBrowserTool(
      provider,
      'browser.navigate',
      { url: `${rig.origin}/one` },
      call(),
      dispatchCounter(),
    );
    const leaseId = provider.lease?.leaseId;
    expect(provider.lease?.sequence).toBe(1);

    const hooks = dispatchCounter();
    const failure = await rejection(
      executeBrowserTool(provider, 'browser.navigate', { url: `${refused}/` }, call(), hooks),
    );
    expect(hooks.calls).toBe(1);
    expect(failure.code).toBe('navigation_failed');
    expect(failure.message).toContain('net::ERR_CONNECTION_REFUSED');
    expect(failure.facts).toMatchObject({
      dispatched: true,
      sequence: 2,
      net_error: 'net::ERR_CONNECTION_REFUSED',
    });
    expect(failure.page?.observation.revision).toBeTruthy();
    expect(failure.page?.observation.revision).not.toBe(first.observation.revision);
    expect(provider.lease).toMatchObject({ leaseId, sequence: 2 });

    const again = await executeBrowserTool(
      provider,
      'browser.navigate',
      { url: `${rig.origin}/two` },
      call(),
      dispatchCounter(),
    );
    expect(again.observation.title).toBe('shop');
    expect(provider.lease).toMatchObject({ leaseId, sequence: 3 });
  });

  it('answers the data plane 502 navigation_failed with the net:: name, the lease and the error page', async () => {
    const profileId = await newProfile();
    const provider = rig.provider(profileId, 'run_navfail_raw');
    await executeBrowserTool(
      provider,
      'browser.navigate',
      { url: `${rig.origin}/one` },
      call(),
      dispatchCounter(),
    );
    const leaseId = provider.lease?.leaseId ?? '';
    const answer = await rig.worker.call('POST', `${profilePath(profileId)}/leases/${leaseId}/navigate`, {
      body: { sequence: 2, url: `${refused}/` },
    });
    expect(answer.status).toBe(502);
    expect(answer.body.error).toMatchObject({
      code: 'navigation_failed',
      dispatched: true,
      sequence: 2,
      net_error: 'net::ERR_CONNECTION_REFUSED',
    });
    expect(answer.body.lease).toMatchObject({ lease_id: leaseId, state: 'live', sequence: 2, effects: 2 });
    expect(typeof answer.body.observation.revision).toBe('string');
    // The lease goes on at the next sequence.
    const next = await rig.worker.call('POST', `${profilePath(profileId)}/leases/${leaseId}/navigate`, {
      body: { sequence: 3, url: `${rig.origin}/two` },
    });
    expect(next.status).toBe(200);
  });
});
