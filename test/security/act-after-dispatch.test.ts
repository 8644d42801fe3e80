import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserObservation } from '../../libs/contracts/index.js';
import { BrowserToolExecutor } from '../../libs/runtime/index.js';
import type { ToolCall, ToolOutcome } from '../../libs/runtime/model.js';
import { LeaseRig } from '../fixtures/lease-rig.js';
import { PageServer } from '../fixtures/page-server.js';
import { uniquePrefix } from '../fixtures/redis.js';

/**
 * The page engine answers `url_disallowed` AFTER dispatch when page script (here
 * a link) navigates the page to a disallowed origin during an act. The service has advanced the
 * lease's sequence by then; the run side must move its own with it and keep the lease.
 */
describe('an act the origin guard stops after dispatch', () => {
  const prefix = uniquePrefix('act-after-dispatch');
  let allowed: PageServer;
  let disallowed: PageServer;
  let rig: LeaseRig;

  beforeAll(async () => {
    [allowed, disallowed] = await Promise.all([PageServer.start(), PageServer.start()]);
    rig = await LeaseRig.start({
      prefix,
      principal: 'owner',
      profileIds: 'after-dispatch',
      allowedOrigins: [allowed.origin],
    });
  });

  afterAll(async () => {
    await rig?.close();
    await allowed?.close();
    await disallowed?.close();
  });

  it('answers url_disallowed, keeps the lease, and lets the next act through at the next sequence', async () => {
    const page = allowed.addPage(
      'leave.html',
      `<!doctype html><html lang="en"><head><title>Leave</title></head><body>
<a href="${disallowed.url('/pages/elsewhere.html')}">Elsewhere</a>
<button onclick="document.getElementById('said').textContent = 'Stayed'">Stay</button>
<p id="said">Here</p></body></html>`,
    );
    const profileId = await rig.newProfile();
    const provider = rig.provider(profileId, 'run_after_dispatch');
    const executor = new BrowserToolExecutor(provider, Date.now() + 10 * 60_000);
    const dispatched: string[] = [];
    let n = 0;
    const call = (name: string, args: Record<string, unknown>): Promise<ToolOutcome> => {
      n += 1;
      const id = `run_after_dispatch:1:${n}:0`;
      return executor.execute({ id: `call_${n}`, name, args } satisfies ToolCall, {
        invocationId: id,
        deadlineMs: Date.now() + 20_000,
        signal: new AbortController().signal,
        beforeDispatch: async () => {
          dispatched.push(id);
        },
      });
    };
    const observationOf = (outcome: ToolOutcome): BrowserObservation => {
      if (!outcome.ok) throw new Error(`the call failed ${outcome.code}: ${outcome.message}`);
      return (outcome.result as { observation: BrowserObservation }).observation;
    };
    const refOf = (observation: BrowserObservation, name: string): string => {
      const element = observation.elements.find((candidate) => candidate.name === name);
      if (!element) throw new Error(`no element named ${name}`);
      return element.ref;
    };

    const opened = observationOf(await call('browser.navigate', { url: page }));
    const leaseId = provider.lease?.leaseId;
    expect(provider.lease?.sequence).toBe(1);

    const away = await call('browser.act', {
      revision: opened.revision,
      element: refOf(opened, 'Elsewhere'),
      action: 'click',
    });
    expect(away).toMatchObject({ ok: false, code: 'url_disallowed' });
    expect(disallowed.log).toHaveLength(0);
    // The click left (sequence 2 was used): the provider knows it, and still trusts the lease.
    expect(provider.lease).toMatchObject({ leaseId, sequence: 2 });
    expect(provider.retiredLease).toBeUndefined();

    const seen = observationOf(await call('browser.observe', {}));
    expect(seen.url).toBe(page);
    const stayed = observationOf(
      await call('browser.act', { revision: seen.revision, element: refOf(seen, 'Stay'), action: 'click' }),
    );
    expect(stayed.text).toContain('Stayed');
    expect(provider.lease).toMatchObject({ leaseId, sequence: 3 });
    const view = await rig.admin.getLease({ tenant: 't1', id: profileId }, leaseId as string);
    expect(view).toMatchObject({ state: 'live', sequence: 3, effects: 3 });
    // Navigate, the refused click and the last click were dispatched; the observe is no effect.
    expect(dispatched).toEqual([
      'run_after_dispatch:1:1:0',
      'run_after_dispatch:1:2:0',
      'run_after_dispatch:1:4:0',
    ]);
  });

  it('answers invalid_arguments for a key the browser will not press, and keeps the lease in step', async () => {
    const page = allowed.addPage(
      'press.html',
      `<!doctype html><html lang="en"><head><title>Press</title></head><body>
<label>Search <input name="q"></label></body></html>`,
    );
    const profileId = await rig.newProfile();
    const provider = rig.provider(profileId, 'run_press_key');
    const executor = new BrowserToolExecutor(provider, Date.now() + 10 * 60_000);
    let n = 0;
    const call = (name: string, args: Record<string, unknown>): Promise<ToolOutcome> => {
      n += 1;
      return executor.execute(
        { id: `call_${n}`, name, args },
        {
          invocationId: `run_press_key:1:${n}:0`,
          deadlineMs: Date.now() + 20_000,
          signal: new AbortController().signal,
          beforeDispatch: async () => undefined,
        },
      );
    };
    const opened = await call('browser.navigate', { url: page });
    if (!opened.ok) throw new Error(opened.message);
    const observation = (opened.result as { observation: BrowserObservation }).observation;
    const search = observation.elements.find((element) => element.name === 'Search');
    const pressed = await call('browser.act', {
      revision: observation.revision,
      element: search?.ref,
      action: 'press',
      text: 'NoSuchKey',
    });
    expect(pressed).toMatchObject({ ok: false, code: 'invalid_arguments' });
    const leaseId = provider.lease?.leaseId as string;
    const view = await rig.admin.getLease({ tenant: 't1', id: profileId }, leaseId);
    expect(provider.lease?.sequence).toBe(view.sequence);
    const next = await call('browser.navigate', { url: page });
    expect(next.ok).toBe(true);
    expect(provider.lease).toMatchObject({ leaseId, sequence: view.sequence + 1 });
  });
});
