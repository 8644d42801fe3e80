import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { advertisedUrl, localHostname } from '../../apps/browser-worker/advertised-url.js';

const base = { port: 8081, hostname: 'browser-worker-0', hostnameResolves: true, configuredUrl: undefined };

describe('the URL a browser worker advertises', () => {
  it('advertises BROWSER_WORKER_URL when it is set, whatever HOST is', () => {
    for (const host of ['0.0.0.0', '::', '127.0.0.1'])
      expect(
        advertisedUrl({
          ...base,
          host,
          hostnameResolves: false,
          configuredUrl: 'http://browser-worker-0.browser-workers:8081',
        }),
      ).toEqual({
        ok: true,
        url: 'http://browser-worker-0.browser-workers:8081',
        source: 'BROWSER_WORKER_URL',
      });
  });

  it('advertises the machine’s name when bound to every interface', () => {
    expect(advertisedUrl({ ...base, host: '0.0.0.0' })).toEqual({
      ok: true,
      url: 'http://browser-worker-0:8081',
      source: 'hostname',
    });
    expect(advertisedUrl({ ...base, host: '::', port: 9000 })).toEqual({
      ok: true,
      url: 'http://browser-worker-0:9000',
      source: 'hostname',
    });
  });

  it('refuses, naming BROWSER_WORKER_URL, when bound to every interface and the name does not resolve', () => {
    const refused = advertisedUrl({ ...base, host: '0.0.0.0', hostnameResolves: false });
    expect(refused.ok).toBe(false);
    if (refused.ok) return;
    expect(refused.message).toContain('BROWSER_WORKER_URL');
    expect(refused.message).toContain('"browser-worker-0"');
    expect(advertisedUrl({ ...base, host: '::', hostname: '', hostnameResolves: false }).ok).toBe(false);
  });

  it('advertises the one address it listens on otherwise, an IPv6 one in brackets', () => {
    expect(advertisedUrl({ ...base, host: '127.0.0.1', hostnameResolves: false })).toEqual({
      ok: true,
      url: 'http://127.0.0.1:8081',
      source: 'HOST',
    });
    expect(advertisedUrl({ ...base, host: '::1' })).toMatchObject({ url: 'http://[::1]:8081' });
    expect(advertisedUrl({ ...base, host: '10.1.2.3' })).toMatchObject({ url: 'http://10.1.2.3:8081' });
  });

  it('looks this machine’s name up only when it would be advertised', async () => {
    expect(await localHostname('0.0.0.0', undefined)).toEqual({
      hostname: hostname(),
      hostnameResolves: true,
    });
    expect(await localHostname('127.0.0.1', undefined)).toEqual({
      hostname: hostname(),
      hostnameResolves: false,
    });
    expect(await localHostname('0.0.0.0', 'http://bw:8081')).toMatchObject({ hostnameResolves: false });
  });
});
