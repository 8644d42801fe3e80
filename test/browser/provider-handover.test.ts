import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BrowserToolExecutor } from '../../libs/runtime/index.js';
import { LeaseRig } from '../fixtures/lease-rig.js';
import { PRESS_PAGE } from '../fixtures/press-site.js';
import { uniquePrefix } from '../fixtures/redis.js';

/**
 * ADR-0127 d3, amended, on the run side: a call an earlier owner dispatched and never had answered
 * is answered from its lease by the next owner's executor, against a real browser worker.
 */
describe('a handed-over call, answered by the next owner', () => {
  let rig: LeaseRig;

  beforeAll(async () => {
    rig = await LeaseRig.start({
      prefix: uniquePrefix('runhandover'),
      principal: 'owner',
      profileIds: 'rho',
      page: PRESS_PAGE,
    });
  });

  afterAll(async () => {
    await rig?.close();
  });

  const context = (id: string) => ({
    invocationId: id,
    deadlineMs: Date.now() + 20_000,
    signal: new AbortController().signal,
  });

  it('one that never reached the lease is refused before dispatch and never sent; the lease goes on past it', async () => {
    const profileId = await rig.newProfile();
    const first = new BrowserToolExecutor(rig.provider(profileId, 'run_ho'), Date.now() + 600_000);
    const navigate = { id: 'c1', name: 'browser.navigate', args: { url: `${rig.origin}/one` } };
    const sent = await first.execute(navigate, {
      ...context('run_ho:1:0'),
      beforeDispatch: async () => undefined,
    });
    expect(sent.ok).toBe(true);

    // The next owner: a new provider of the same run attempt; the ledger names sequence 2 on the lease.
    const provider = rig.provider(profileId, 'run_ho');
    const next = new BrowserToolExecutor(provider, Date.now() + 600_000);
    const lease = (await provider.ensureLease('run_ho:peek', Date.now() + 600_000)).leaseId;
    const lost = { id: 'c2', name: 'browser.navigate', args: { url: `${rig.origin}/never` } };
    const answered = await next.handedOver(lost, { leaseId: lease, sequence: 2 }, context('run_ho:2:0'));
    expect(answered).toMatchObject({ ok: false, code: 'page_changed' });
    expect(provider.lease?.sequence).toBe(2);

    // The run goes on from there: its next effect carries sequence 3.
    const after = { id: 'c3', name: 'browser.navigate', args: { url: `${rig.origin}/three` } };
    let carried = 0;
    const went = await next.execute(after, {
      ...context('run_ho:3:0'),
      beforeDispatch: async (effect) => {
        carried = effect?.sequence ?? 0;
      },
    });
    expect(went.ok).toBe(true);
    expect(carried).toBe(3);

    // That one learned again, answered: applied, with a fresh observation and the step's note.
    const learned = await next.handedOver(after, { leaseId: lease, sequence: 3 }, context('run_ho:3:0'));
    expect(learned).toMatchObject({ ok: true, note: 'completed during hand-over' });
    expect((learned as { result: { observation: { title: string } } }).result.observation.title).toBe('shop');
  });
});
