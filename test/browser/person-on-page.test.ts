import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PersonInputEvent } from '../../libs/contracts/index.js';
import { DataPlaneClient, ProviderError } from '../../libs/provider/index.js';
import { judgeFailedPageCall } from '../../libs/provider/lease-trust.js';
import {
  leaseOwnProfile,
  startTestBrowserWorker,
  TEST_TOKEN,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { EventStreamReader, type StreamEvent } from '../fixtures/event-stream.js';
import { eventually } from '../fixtures/eventually.js';
import { capturingLogger } from '../fixtures/logger.js';
import { PageServer } from '../fixtures/page-server.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/** The live view and person control of a lease's page, on a real browser worker and Chromium. */
describe('a person on the page (data plane)', () => {
  const prefix = uniquePrefix('person');
  const logs = capturingLogger('debug');
  let worker: TestBrowserWorker;
  let site: PageServer;

  beforeAll(async () => {
    worker = await startTestBrowserWorker({ prefix, logger: logs.logger });
    site = await PageServer.start();
    site.addPage(
      'person-form.html',
      `<!doctype html><title>Form</title>
       <input id="name" aria-label="Name" style="position:fixed;left:0;top:0;width:300px;height:40px"
         oninput="document.getElementById('echo').textContent = 'typed ' + this.value">
       <p id="echo" style="position:fixed;top:60px">nothing typed</p>
       <button style="position:fixed;top:100px" onclick="fetch('/api/slow?ms=1&label=effect')">Count</button>
       <a href="/pages/person-second.html" target="_blank" style="position:fixed;top:140px">Second</a>
       <a href="${site.otherOrigin}/pages/person-away.html" style="position:fixed;left:0;top:200px;width:200px;height:40px;display:block">Away</a>`,
    );
    site.addPage(
      'person-dialogs.html',
      `<!doctype html><title>Dialogs</title>
       <button style="position:fixed;left:0;top:0;width:200px;height:40px"
         onclick="document.getElementById('log').textContent = 'hello ' + prompt('Your name?', 'nobody')">Prompt</button>
       <button style="position:fixed;left:0;top:60px;width:200px;height:40px"
         onclick="document.getElementById('log').textContent = confirm('Delete everything?') ? 'deleted' : 'kept'">Confirm</button>
       <p id="log" style="position:fixed;top:120px">nothing yet</p>`,
    );
    site.addPage('person-second.html', '<!doctype html><title>Second</title><p>the second tab</p>');
    site.addPage('person-away.html', '<!doctype html><title>Away</title><p>away</p>');
  });

  afterAll(async () => {
    await worker?.handle.close();
    await site?.close();
    const redis = new Redis(testRedisUrl());
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  async function leaseOnForm(runId: string) {
    const lease = await leaseOwnProfile(worker, 'person', runId, site.origin);
    const navigated = await worker.call('POST', `${lease.path}/navigate`, {
      body: { sequence: 1, url: site.url('/pages/person-form.html') },
    });
    expect(navigated.status).toBe(200);
    return { ...lease, observation: navigated.body.observation };
  }

  const watch = (path: string) =>
    EventStreamReader.open(`${worker.url}${path}/live`, {
      authorization: 'Bearer test-data-plane-token-0123456789abcdef',
    });
  const isFrame = (url?: string) => (event: StreamEvent) =>
    event.event === 'frame' && (url === undefined || event.data.url === url);
  const holder = 'principal:alice';
  const click = (x: number, y: number): PersonInputEvent[] => [
    { type: 'mouse', action: 'down', x, y, button: 'left', clicks: 1 },
    { type: 'mouse', action: 'up', x, y, button: 'left', clicks: 1 },
  ];
  const key = (name: string): PersonInputEvent[] => [
    { type: 'key', action: 'down', key: name },
    { type: 'key', action: 'up', key: name },
  ];

  it('streams frames of the current tab only while a stream is open, and follows a new tab', async () => {
    const lease = await leaseOnForm('run_live');
    const stream = await watch(lease.path);
    expect(stream.status).toBe(200);
    expect(stream.contentType).toContain('text/event-stream');
    expect((await stream.next((event) => event.event === 'state')).data).toEqual({ person: null });
    const frame = await stream.next(isFrame(site.url('/pages/person-form.html')));
    expect(Buffer.from(frame.data.jpeg, 'base64').subarray(0, 2)).toEqual(Buffer.from([0xff, 0xd8]));
    expect(frame.data.width).toBeGreaterThan(0);
    stream.close();

    const feed = () => worker.handle.leases.person.feedOf(lease.leaseId);
    const stopped = await eventually(
      async () => ({ viewers: feed()?.viewers, casting: feed()?.casting }),
      (state) => state.viewers === 0 && state.casting === false,
      10_000,
    );
    expect(stopped).toEqual({ viewers: 0, casting: false });
    const sentWhileWatched = feed()?.framesSent ?? 0;
    // The page changes while nobody watches: no frame is made for it.
    const changed = await worker.call('POST', `${lease.path}/navigate`, {
      body: { sequence: 2, url: site.url('/pages/person-second.html') },
    });
    expect(changed.status).toBe(200);
    expect(feed()?.framesSent).toBe(sentWhileWatched);

    const back = await worker.call('POST', `${lease.path}/navigate`, {
      body: { sequence: 3, url: site.url('/pages/person-form.html') },
    });
    const again = await watch(lease.path);
    const first = await again.next(isFrame(site.url('/pages/person-form.html')));
    const link = back.body.observation.elements.find(
      (element: { role: string; name: string }) => element.role === 'link' && element.name === 'Second',
    );
    const opened = await worker.call('POST', `${lease.path}/act`, {
      body: {
        sequence: 4,
        args: { revision: back.body.observation.revision, element: link.ref, action: 'click' },
      },
    });
    expect(opened.status).toBe(200);
    const second = await again.next(isFrame(site.url('/pages/person-second.html')));
    expect(second.data.tab).not.toBe(first.data.tab);
    again.close();
  });

  it("sends the holder's typing to the page's field, advancing the sequence, and logs none of it", async () => {
    const lease = await leaseOnForm('run_type');
    const stream = await watch(lease.path);
    await stream.next((event) => event.event === 'state');

    const started = await worker.call('POST', `${lease.path}/person-control`, {
      body: { holder, seconds: 600 },
    });
    expect(started.status).toBe(200);
    expect(started.body.sequence).toBe(2);
    expect(started.body.until_ms - started.body.since_ms).toBe(600_000);
    expect((await stream.next((event) => event.event === 'state')).data.person).toMatchObject({ holder });

    const typed = await worker.call('POST', `${lease.path}/input`, {
      body: {
        holder,
        events: [...click(20, 20), ...key('z'), ...key('q'), { type: 'text', text: 'pw-4417' }],
      },
    });
    expect(typed.status).toBe(200);
    expect(typed.body.sequence).toBe(3);

    const ended = await worker.call('DELETE', `${lease.path}/person-control`, { body: { holder } });
    expect(ended.status).toBe(200);
    expect(ended.body).toMatchObject({ sequence: 4, inputs: 7, url: site.url('/pages/person-form.html') });
    expect((await stream.next((event) => event.event === 'state')).data).toEqual({ person: null });
    stream.close();

    const seen = await worker.call('POST', `${lease.path}/observe`, { body: {} });
    expect(seen.status).toBe(200);
    expect(seen.body.observation.text).toContain('typed zqpw-4417');
    const lease2 = await worker.call('GET', lease.path);
    expect(lease2.body.sequence).toBe(4);
    expect(JSON.stringify(logs.lines)).not.toContain('pw-4417');
  });

  it("refuses the agent's calls before dispatch while a person holds the page: the site counts no effect", async () => {
    const lease = await leaseOnForm('run_refuse');
    const button = lease.observation.elements.find(
      (element: { role: string; name: string }) => element.role === 'button' && element.name === 'Count',
    );
    expect(
      (await worker.call('POST', `${lease.path}/person-control`, { body: { holder, seconds: 60 } })).status,
    ).toBe(200);
    const effectsBefore = site.log.filter((entry) => entry.path.includes('label=effect')).length;
    const secondBefore = site.log.filter((entry) => entry.path === '/pages/person-second.html').length;

    const acted = await worker.call('POST', `${lease.path}/act`, {
      body: {
        sequence: 3,
        args: { revision: lease.observation.revision, element: button.ref, action: 'click' },
      },
    });
    expect(acted.status).toBe(409);
    expect(acted.body.error).toMatchObject({ code: 'person_in_control', dispatched: false });
    const navigated = await worker.call('POST', `${lease.path}/navigate`, {
      body: { sequence: 3, url: site.url('/pages/person-second.html') },
    });
    expect(navigated.body.error.code).toBe('person_in_control');
    expect((await worker.call('POST', `${lease.path}/observe`, { body: {} })).body.error.code).toBe(
      'person_in_control',
    );
    expect(site.log.filter((entry) => entry.path.includes('label=effect')).length).toBe(effectsBefore);
    expect(site.log.filter((entry) => entry.path === '/pages/person-second.html')).toHaveLength(secondBefore);
    expect((await worker.call('GET', lease.path)).body).toMatchObject({ sequence: 2, effects: 2 });
  });

  it('refuses, by the origin fence, a link to a disallowed origin the person clicks, and shows it', async () => {
    const lease = await leaseOnForm('run_fence');
    const stream = await watch(lease.path);
    await stream.next(isFrame());
    await worker.call('POST', `${lease.path}/person-control`, { body: { holder, seconds: 60 } });
    const clicked = await worker.call('POST', `${lease.path}/input`, {
      body: { holder, events: click(20, 215) },
    });
    expect(clicked.status).toBe(200);
    expect((await stream.next((event) => event.event === 'blocked')).data).toMatchObject({ navigations: 1 });
    stream.close();
    const ended = await worker.call('DELETE', `${lease.path}/person-control`, { body: { holder } });
    expect(ended.body.url).toBe(site.url('/pages/person-form.html'));
    expect(site.log.filter((entry) => entry.path === '/pages/person-away.html')).toHaveLength(0);
  });

  it('lets one person hold a page at a time: another is refused control and input', async () => {
    const lease = await leaseOnForm('run_two');
    expect(
      (await worker.call('POST', `${lease.path}/person-control`, { body: { holder, seconds: 60 } })).status,
    ).toBe(200);
    const other = { holder: 'principal:bob' };
    const taken = await worker.call('POST', `${lease.path}/person-control`, {
      body: { ...other, seconds: 60 },
    });
    expect(taken.status).toBe(409);
    expect(taken.body.error.code).toBe('person_in_control');
    const typed = await worker.call('POST', `${lease.path}/input`, { body: { ...other, events: key('a') } });
    expect(typed.status).toBe(409);
    expect(typed.body.error.code).toBe('person_not_in_control');
    const ended = await worker.call('DELETE', `${lease.path}/person-control`, { body: other });
    expect(ended.body.error.code).toBe('person_not_in_control');
    // The holder asking again renews.
    const renewed = await worker.call('POST', `${lease.path}/person-control`, {
      body: { holder, seconds: 120 },
    });
    expect(renewed.status).toBe(200);
    expect(renewed.body.until_ms - renewed.body.since_ms).toBe(120_000);
  });

  it("shows a dialog of the current tab on the stream, and the holder's answer reaches the page", async () => {
    const lease = await leaseOnForm('run_dialog');
    const navigated = await worker.call('POST', `${lease.path}/navigate`, {
      body: { sequence: 2, url: site.url('/pages/person-dialogs.html') },
    });
    const stream = await watch(lease.path);
    await stream.next(isFrame(site.url('/pages/person-dialogs.html')));
    await worker.call('POST', `${lease.path}/person-control`, { body: { holder, seconds: 60 } });
    const isDialog = (event: StreamEvent) => event.event === 'dialog';

    // The person's click opens a prompt: the screencast cannot paint it, the stream tells it.
    const clicked = await worker.call('POST', `${lease.path}/input`, {
      body: { holder, events: click(20, 20) },
    });
    expect(clicked.status).toBe(200);
    expect((await stream.next(isDialog)).data).toEqual({
      dialog: {
        type: 'prompt',
        message: 'Your name?',
        default_value: 'nobody',
        url: site.url('/pages/person-dialogs.html'),
      },
    });
    // A viewer who comes now is told of it at once.
    const late = await watch(lease.path);
    expect((await late.next(isDialog)).data.dialog).toMatchObject({ type: 'prompt' });
    late.close();

    const answered = await worker.call('POST', `${lease.path}/input`, {
      body: { holder, events: [{ type: 'dialog', accept: true, text: 'Ada-pw-5512' }] },
    });
    expect(answered.status).toBe(200);
    expect((await stream.next(isDialog)).data).toEqual({ dialog: null });
    await worker.call('DELETE', `${lease.path}/person-control`, { body: { holder } });
    const seen = await worker.call('POST', `${lease.path}/observe`, { body: {} });
    expect(seen.body.observation.text).toContain('hello Ada-pw-5512');
    expect(JSON.stringify(logs.lines)).not.toContain('Ada-pw-5512');

    // A dialog the agent's act opens is shown too, and the agent still answers it as before.
    const confirm = seen.body.observation.elements.find(
      (element: { role: string; name: string }) => element.role === 'button' && element.name === 'Confirm',
    );
    expect(navigated.status).toBe(200);
    const lastSequence = (await worker.call('GET', lease.path)).body.sequence;
    const acted = await worker.call('POST', `${lease.path}/act`, {
      body: {
        sequence: lastSequence + 1,
        args: { revision: seen.body.observation.revision, element: confirm.ref, action: 'click' },
      },
    });
    expect(acted.body.observation.dialog).toEqual({ type: 'confirm', message: 'Delete everything?' });
    expect((await stream.next(isDialog)).data.dialog).toMatchObject({ type: 'confirm' });
    const dismissed = await worker.call('POST', `${lease.path}/act`, {
      body: {
        sequence: lastSequence + 2,
        args: { revision: acted.body.observation.revision, element: 'dialog', action: 'dismiss' },
      },
    });
    expect(dismissed.body.observation.text).toContain('kept');
    expect((await stream.next(isDialog)).data).toEqual({ dialog: null });
    stream.close();
  });

  it('refuses a dialog answer from anyone but the holder, and skips one with no dialog open', async () => {
    const lease = await leaseOnForm('run_dialog_other');
    const answer = { type: 'dialog', accept: false } as const;
    const refused = await worker.call('POST', `${lease.path}/input`, { body: { holder, events: [answer] } });
    expect(refused.status).toBe(409);
    await worker.call('POST', `${lease.path}/person-control`, { body: { holder, seconds: 60 } });
    const none = await worker.call('POST', `${lease.path}/input`, {
      body: { holder, events: [answer, ...click(20, 20), { type: 'text', text: 'after' }] },
    });
    expect(none.status).toBe(200);
    await worker.call('DELETE', `${lease.path}/person-control`, { body: { holder } });
    const seen = await worker.call('POST', `${lease.path}/observe`, { body: {} });
    expect(seen.body.observation.text).toContain('typed after');
  });

  it('refuses input past 200 events a second on a lease, whole batches at a time', async () => {
    const lease = await leaseOnForm('run_rate');
    await worker.call('POST', `${lease.path}/person-control`, { body: { holder, seconds: 60 } });
    const batch = Array.from(
      { length: 50 },
      (): PersonInputEvent => ({ type: 'mouse', action: 'move', x: 5, y: 5 }),
    );
    const answers = await Promise.all(
      // Twelve batches at once: even spread over a second and more by a loaded machine, they outrun it.
      Array.from({ length: 12 }, () =>
        worker.call('POST', `${lease.path}/input`, { body: { holder, events: batch } }),
      ),
    );
    const statuses = answers.map((answer) => answer.status).sort();
    expect(statuses).toContain(429);
    expect(answers.find((answer) => answer.status === 429)?.body.error.code).toBe('rate_limited');
  });

  it("answers 404 for the lease under another tenant's path, on every person route", async () => {
    const lease = await leaseOnForm('run_tenant');
    const foreign = lease.path.replace('/tenants/t1/', '/tenants/t2/');
    const stream = await watch(foreign);
    expect(stream.status).toBe(404);
    for (const [method, verb, body] of [
      ['POST', 'person-control', { holder, seconds: 60 }],
      ['DELETE', 'person-control', { holder }],
      ['POST', 'input', { holder, events: key('a') }],
    ] as const) {
      const answer = await worker.call(method, `${foreign}/${verb}`, { body });
      expect(answer.status).toBe(404);
    }
    const unauthenticated = await worker.call('POST', `${lease.path}/person-control`, {
      body: { holder, seconds: 60 },
      token: null,
    });
    expect(unauthenticated.status).toBe(401);
  });

  it("serves the provider client: control, input, the live view, and the agent's act refused before dispatch", async () => {
    const lease = await leaseOnForm('run_client');
    const client = new DataPlaneClient({ baseUrl: worker.url, token: TEST_TOKEN });
    const ref = { profile: { tenant: 't1', id: lease.profileId }, leaseId: lease.leaseId };
    const stop = new AbortController();
    const events = (await client.openLive(ref, stop.signal))[Symbol.asyncIterator]();
    expect((await events.next()).value).toEqual({ event: 'state', data: { person: null } });

    const started = await client.startPersonControl(ref, { holder, seconds: 30 });
    expect(started.sequence).toBe(2);
    const button = lease.observation.elements.find(
      (element: { role: string; name: string }) => element.role === 'button' && element.name === 'Count',
    );
    const refused = await client
      .act(ref.profile, ref.leaseId, 3, {
        revision: lease.observation.revision,
        element: button.ref,
        action: 'click',
      })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ProviderError);
    expect(refused).toMatchObject({ code: 'person_in_control' });
    expect(judgeFailedPageCall(refused, 2).drop).toBeUndefined();

    expect(await client.sendPersonInput(ref, { holder, events: [...click(20, 20), ...key('k')] })).toEqual({
      sequence: 3,
    });
    const ended = await client.endPersonControl(ref, { holder });
    expect(ended).toMatchObject({ sequence: 4, inputs: 4 });
    let next = await events.next();
    while (!next.done && next.value.event !== 'state') next = await events.next();
    expect(next.value).toMatchObject({ event: 'state', data: { person: { holder } } });
    stop.abort();
    await events.return?.(undefined);
  });

  it('ends the stream when the lease closes', async () => {
    const lease = await leaseOnForm('run_close');
    const stream = await watch(lease.path);
    await stream.next((event) => event.event === 'state');
    await worker.call('POST', `${lease.path}/close`, {
      body: { seal: false },
      idempotencyKey: `close-${Date.now()}`,
    });
    await stream.untilEnded();
    expect(stream.ended).toBe(true);
  });
});
