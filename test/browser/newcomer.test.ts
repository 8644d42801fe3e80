import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserLeaseProvider } from '../../libs/provider/index.js';
import type { RedisLeaseStore } from '../../libs/store/index.js';
import { LeaseRig, rejection, rigProfile } from '../fixtures/lease-rig.js';
import { uniquePrefix } from '../fixtures/redis.js';

/**
 * ADR-0127 d7: a newcomer run cannot take a page another run still needs; once that run has ended,
 * the newcomer's provider seals and replaces its lease. The holder and the newcomer are separate
 * providers, as two run workers would have, meeting only through the lease service.
 */
describe('a newcomer run on a profile another run holds', () => {
  let rig: LeaseRig;
  let leases: RedisLeaseStore;

  beforeAll(async () => {
    rig = await LeaseRig.start({
      prefix: uniquePrefix('newcomer'),
      principal: 'owner',
      profileIds: 'newcomer',
      allowedOrigins: ['http://127.0.0.1'],
    });
    leases = rig.leases;
  });

  afterAll(async () => {
    await rig?.close();
  });

  /** One run worker's provider for `runId`, reading run state through `holderNeedsPage`. */
  function workerProvider(
    profileId: string,
    runId: string,
    holderNeedsPage?: (runId: string) => Promise<boolean>,
  ): BrowserLeaseProvider {
    return rig.provider(profileId, runId, { holderNeedsPage });
  }

  it('refuses the newcomer profile_unavailable while the holder run still needs the page, and leaves its lease live', async () => {
    const profileId = await rig.newProfile();
    const holder = await workerProvider(profileId, 'run_parked').ensureLease(
      'parked:1:0',
      Date.now() + 600_000,
    );
    const asked: string[] = [];
    const newcomer = workerProvider(profileId, 'run_newcomer', async (runId) => {
      asked.push(runId);
      return true;
    });

    const error = await rejection(newcomer.ensureLease('newcomer:1:0', Date.now() + 600_000));

    expect(error.code).toBe('profile_unavailable');
    expect(error.facts).toMatchObject({ holder_run_id: 'run_parked' });
    expect(asked).toEqual(['run_parked']);
    expect(newcomer.lease).toBeUndefined();
    expect(await leases.getLease(rigProfile(profileId), holder.leaseId)).toMatchObject({
      state: 'live',
      sealed: false,
      closeReason: undefined,
    });
    expect((await leases.getProfile(rigProfile(profileId)))?.sealedAtMs).toBeUndefined();
  });

  it("seals and closes an ended holder run's lease and gives the newcomer a fresh one", async () => {
    const profileId = await rig.newProfile();
    const holder = await workerProvider(profileId, 'run_ended').ensureLease(
      'ended:1:0',
      Date.now() + 600_000,
    );
    expect((await leases.getProfile(rigProfile(profileId)))?.sealedAtMs).toBeUndefined();
    const asked: string[] = [];
    const newcomer = workerProvider(profileId, 'run_successor', async (runId) => {
      asked.push(runId);
      return false;
    });

    const fresh = await newcomer.ensureLease('successor:1:0', Date.now() + 600_000);

    expect(asked).toEqual(['run_ended']);
    expect(fresh.leaseId).not.toBe(holder.leaseId);
    expect(newcomer.lease).toMatchObject({ leaseId: fresh.leaseId, profileId, sequence: 0 });
    expect(await leases.getLease(rigProfile(profileId), holder.leaseId)).toMatchObject({
      state: 'closed',
      closeReason: 'closed',
      sealed: true,
    });
    const profile = await leases.getProfile(rigProfile(profileId));
    expect(profile?.sealedBlob).toBeDefined();
    expect(profile?.sealedAtMs).toEqual(expect.any(Number));
    expect(await leases.getLease(rigProfile(profileId), fresh.leaseId)).toMatchObject({
      state: 'live',
      scope: { run_id: 'run_successor', attempt: 1 },
    });
    expect(await leases.liveLeaseId(rigProfile(profileId))).toBe(fresh.leaseId);
  });

  it('seals and replaces the holder lease when no run-state reader is configured', async () => {
    const profileId = await rig.newProfile();
    const holder = await workerProvider(profileId, 'run_unread').ensureLease(
      'unread:1:0',
      Date.now() + 600_000,
    );

    const fresh = await workerProvider(profileId, 'run_unreading').ensureLease(
      'unreading:1:0',
      Date.now() + 600_000,
    );

    expect(fresh.leaseId).not.toBe(holder.leaseId);
    expect(await leases.getLease(rigProfile(profileId), holder.leaseId)).toMatchObject({
      state: 'closed',
      sealed: true,
    });
  });

  it('replaces the lease an earlier attempt of the same run left, even while that run needs a page again', async () => {
    // A retried run: attempt 1 failed and its execution has not closed its page yet when attempt 2
    // acquires. The run is queued again (it needs a page), but not attempt 1's.
    const profileId = await rig.newProfile();
    const first = await workerProvider(profileId, 'run_retried').ensureLease(
      'retried:1:0',
      Date.now() + 600_000,
    );
    const asked: string[] = [];
    const second = rig.provider(profileId, 'run_retried', {
      attempt: 2,
      holderNeedsPage: async (runId) => {
        asked.push(runId);
        return true;
      },
    });

    const fresh = await second.ensureLease('retried:2:0', Date.now() + 600_000);

    expect(fresh.leaseId).not.toBe(first.leaseId);
    expect(asked).toEqual([]);
    expect(await leases.getLease(rigProfile(profileId), first.leaseId)).toMatchObject({
      state: 'closed',
      sealed: true,
    });
    expect(await leases.getLease(rigProfile(profileId), fresh.leaseId)).toMatchObject({
      state: 'live',
      scope: { run_id: 'run_retried', attempt: 2 },
    });
  });

  it('never replaces a lease of the same attempt of the same run', async () => {
    const profileId = await rig.newProfile();
    const held = await workerProvider(profileId, 'run_twice').ensureLease('twice:1:0', Date.now() + 600_000);
    const rival = rig.provider(profileId, 'run_twice', {
      principal: 'someone-else',
      holderNeedsPage: async () => false,
    });

    const error = await rejection(rival.ensureLease('twice:1:1', Date.now() + 600_000));

    expect(error.code).toBe('profile_unavailable');
    expect(await leases.getLease(rigProfile(profileId), held.leaseId)).toMatchObject({ state: 'live' });
  });
});
