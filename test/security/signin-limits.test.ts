import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiRig, startApiRig } from './api-rig.js';

interface SignInAnswer {
  status: number;
  setCookie: string[];
  retryAfter: string | undefined;
  text: string;
}

/**
 * One `POST /signin` as a browser's form would send it, from `from` (a 127/8 source address: the
 * API takes the socket's address, with no proxy header trusted), with the headers given.
 */
function signIn(
  url: string,
  form: Record<string, string>,
  options: { headers?: Record<string, string>; from?: string } = {},
): Promise<SignInAnswer> {
  const body = new URLSearchParams(form).toString();
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest(
      `${url}/signin`,
      {
        method: 'POST',
        localAddress: options.from ?? '127.0.0.1',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          'content-length': String(Buffer.byteLength(body)),
          ...options.headers,
        },
        timeout: 10_000,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            setCookie: response.headers['set-cookie'] ?? [],
            retryAfter: response.headers['retry-after'],
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
      },
    );
    outgoing.on('error', reject);
    outgoing.on('timeout', () => outgoing.destroy(new Error('no answer to POST /signin')));
    outgoing.end(body);
  });
}

const SIGNINS_PER_MINUTE = 4;
const FAILURES_PER_MINUTE = 3;

/**
 * `POST /signin` made a 12-hour session at every call, outside any limit, and took another site's
 * form (login CSRF: a victim's browser signed into the attacker's tenant). Now it takes only forms
 * from the API's own origin, at most SIGNINS_PER_MINUTE per /24 (failed ones also within
 * AUTH_FAILURES_PER_MINUTE per /24), and a key holds at most 5 sessions: the 6th ends the oldest.
 */
describe('signing in to the run pages', { timeout: 60_000 }, () => {
  let rig: ApiRig;
  let key: string;
  let own: Record<string, string>;

  beforeAll(async () => {
    rig = await startApiRig('signin', {
      SIGNINS_PER_MINUTE: String(SIGNINS_PER_MINUTE),
      AUTH_FAILURES_PER_MINUTE: String(FAILURES_PER_MINUTE),
    });
    key = await rig.key('signin', 'sam', ['runs:read']);
    own = { origin: new URL(rig.api.url).origin };
  });

  afterAll(async () => {
    await rig?.close();
  });

  const sessionRecords = async () => (await rig.storedKeys()).filter((name) => name.includes(':ui-session:'));

  it.each([
    ['another site’s form (Origin: http://evil.example)', { origin: 'http://evil.example' }],
    ['a request with neither Origin nor Sec-Fetch-Site', {}],
    ['a cross-site fetch without Origin', { 'sec-fetch-site': 'cross-site' }],
    ['a same-site page on another origin', { origin: 'http://127.0.0.1:1', 'sec-fetch-site': 'same-site' }],
    ['a spoofed Host that matches the Origin', { origin: 'http://evil.example', host: 'evil.example' }],
  ])('refuses %s with no cookie and no session', async (_what, headers) => {
    const before = await sessionRecords();
    const answer = await signIn(rig.api.url, { key, next: '/runs' }, { headers, from: '127.0.5.1' });
    expect(answer.status).toBe(403);
    expect(answer.setCookie).toEqual([]);
    expect(answer.text).toContain('not sent from this site');
    expect(await sessionRecords()).toEqual(before);
  });

  it('takes the API’s own form, by its Origin or by Sec-Fetch-Site: same-origin', async () => {
    const byOrigin = await signIn(rig.api.url, { key }, { headers: own, from: '127.0.6.1' });
    expect(byOrigin.status).toBe(303);
    expect(byOrigin.setCookie[0]).toMatch(/^lh_session=/);
    const bySite = await signIn(
      rig.api.url,
      { key },
      { headers: { 'sec-fetch-site': 'same-origin' }, from: '127.0.6.2' },
    );
    expect(bySite.status).toBe(303);
  });

  it("ends a key's oldest session at its 6th sign-in: the oldest cookie no longer works", async () => {
    const other = await rig.key('signin', 'sue', ['runs:read']);
    const cookies: string[] = [];
    for (let index = 0; index < 6; index += 1) {
      // Each from a network of its own: the per-network budget is not what this shows.
      const answer = await signIn(
        rig.api.url,
        { key: other },
        { headers: own, from: `127.0.${10 + index}.1` },
      );
      expect(answer.status, `sign-in ${index + 1}`).toBe(303);
      cookies.push((answer.setCookie[0] ?? '').split(';')[0] ?? '');
    }
    const runsWith = async (cookie: string) =>
      (await rig.call('GET', '/v1/runs', { headers: { cookie } })).status;
    expect(await runsWith(cookies[0] as string)).toBe(401);
    for (const cookie of cookies.slice(1)) expect(await runsWith(cookie)).toBe(200);
  });

  it('counts sign-ins per /24: many addresses of one network share one budget', async () => {
    for (let host = 1; host <= SIGNINS_PER_MINUTE; host += 1) {
      const answer = await signIn(rig.api.url, { key }, { headers: own, from: `127.0.20.${host}` });
      expect(answer.status, `sign-in from 127.0.20.${host}`).toBe(303);
    }
    const limited = await signIn(rig.api.url, { key }, { headers: own, from: '127.0.20.200' });
    expect(limited.status).toBe(429);
    expect(limited.setCookie).toEqual([]);
    expect(Number(limited.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(Number(limited.retryAfter)).toBeLessThanOrEqual(60);
    // Another network is not held up.
    expect((await signIn(rig.api.url, { key }, { headers: own, from: '127.0.21.1' })).status).toBe(303);
  });

  it('counts failed sign-ins per /24 against the failed-authentication budget', async () => {
    for (let host = 1; host <= FAILURES_PER_MINUTE; host += 1) {
      const answer = await signIn(
        rig.api.url,
        { key: 'lhk_wrong' },
        { headers: own, from: `127.0.30.${host}` },
      );
      expect(answer.status, `failure from 127.0.30.${host}`).toBe(401);
    }
    const limited = await signIn(rig.api.url, { key: 'lhk_wrong' }, { headers: own, from: '127.0.30.99' });
    expect(limited.status).toBe(429);
    expect(limited.text).toContain('Too many failed sign-ins from this network');
    expect(Number(limited.retryAfter)).toBeGreaterThanOrEqual(1);
  });

  /** A Set-Cookie's attributes after its `name=value`, as a set (their order is no property). */
  const attributesOf = (setCookie: string) =>
    new Set(
      setCookie
        .split(';')
        .slice(1)
        .map((part) => part.trim()),
    );

  it('sets the session cookie HttpOnly, SameSite=Strict, on / for the session’s life, Secure only over https', async () => {
    const cora = await rig.key('signin', 'cora', ['runs:read']);
    const plain = await signIn(rig.api.url, { key: cora }, { headers: own, from: '127.0.40.1' });
    expect(plain.status).toBe(303);
    expect(plain.setCookie).toHaveLength(1);
    expect(plain.setCookie[0]).toMatch(/^lh_session=[A-Za-z0-9_-]{43};/);
    const flags = attributesOf(plain.setCookie[0] ?? '');
    for (const flag of ['HttpOnly', 'SameSite=Strict', 'Path=/', 'Max-Age=43200'])
      expect(flags).toContain(flag);
    expect(flags).not.toContain('Secure');

    const proxied = await signIn(
      rig.api.url,
      { key: cora },
      { headers: { ...own, 'x-forwarded-proto': 'https' }, from: '127.0.41.1' },
    );
    expect(attributesOf(proxied.setCookie[0] ?? '')).toContain('Secure');
  });

  it('finds the session among other cookies, and signs out only with the form’s token, clearing the cookie as it was set', async () => {
    const cora = await rig.key('signin', 'cora', ['runs:read']);
    const answer = await signIn(rig.api.url, { key: cora }, { headers: own, from: '127.0.42.1' });
    const session = (answer.setCookie[0] ?? '').split(';')[0] ?? '';
    const cookie = `theme=dark; ${session}; other=1`;
    expect((await rig.call('GET', '/v1/runs', { headers: { cookie } })).status).toBe(200);
    const page = await rig.call('GET', '/runs', { headers: { cookie } });
    const token = /name="csrf-token" content="([^"]+)"/.exec(String(page.body))?.[1] ?? '';
    expect(token).not.toBe('');

    const signOut = (form: Record<string, string>) =>
      fetch(`${rig.api.url}/signout`, {
        method: 'POST',
        redirect: 'manual',
        body: new URLSearchParams(form).toString(),
        headers: {
          cookie,
          'content-type': 'application/x-www-form-urlencoded',
          'x-forwarded-proto': 'https',
        },
      });
    expect((await signOut({ csrf_token: `${token}x` })).status).toBe(401);
    expect((await rig.call('GET', '/v1/runs', { headers: { cookie } })).status).toBe(200);
    const out = await signOut({ csrf_token: token });
    expect(out.status).toBe(303);
    const cleared = out.headers.get('set-cookie') ?? '';
    expect(cleared).toMatch(/^lh_session=;/);
    const flags = attributesOf(cleared);
    for (const flag of ['HttpOnly', 'SameSite=Strict', 'Path=/', 'Max-Age=0', 'Secure'])
      expect(flags).toContain(flag);
    expect((await rig.call('GET', '/v1/runs', { headers: { cookie } })).status).toBe(401);
  });

  it('refuses a sign-in form past 4 KiB before reading a key from it', async () => {
    const cora = await rig.key('signin', 'cora', ['runs:read']);
    const answer = await signIn(
      rig.api.url,
      { key: cora, next: `/${'x'.repeat(5 * 1024)}` },
      { headers: own, from: '127.0.43.1' },
    );
    expect(answer.status).toBe(413);
    expect(answer.setCookie).toEqual([]);
  });
});
