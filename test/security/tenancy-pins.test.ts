import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../libs/config/index.js';
import { createProfileSchema, pinRank, pinsServe } from '../../libs/contracts/index.js';
import { sealState, unsealState } from '../../libs/lease/index.js';

/** The pure rules: pins name a tenant's profile, a seal is bound to its tenant. */
describe('tenant-scoped pins and seals', () => {
  it('serves a tenant/id pin for that tenant only, a tenant/* pin for all its profiles, * for all', () => {
    const pins = ['ta/shop', 'tc/*'];
    expect(pinsServe(pins, { tenant: 'ta', id: 'shop' })).toBe(true);
    expect(pinsServe(pins, { tenant: 'tb', id: 'shop' })).toBe(false);
    expect(pinsServe(pins, { tenant: 'ta', id: 'other' })).toBe(false);
    expect(pinsServe(pins, { tenant: 'tc', id: 'anything' })).toBe(true);
    expect(pinsServe('*', { tenant: 'tz', id: 'x' })).toBe(true);
    expect(pinRank(pins, { tenant: 'ta', id: 'shop' })).toBeGreaterThan(
      pinRank(['ta/*'], { tenant: 'ta', id: 'shop' }),
    );
    expect(pinRank(['ta/*'], { tenant: 'ta', id: 'shop' })).toBeGreaterThan(
      pinRank('*', { tenant: 'ta', id: 'shop' }),
    );
  });

  it('takes BROWSER_WORKER_PROFILES as tenant/id and tenant/* pins and refuses a bare id', () => {
    const config = loadConfig({ BROWSER_WORKER_PROFILES: 'ta/shop, tc/*' });
    expect(config.browser.pinnedProfiles).toEqual(['ta/shop', 'tc/*']);
    expect(loadConfig({ BROWSER_WORKER_PROFILES: '*' }).browser.pinnedProfiles).toBe('*');
    expect(() => loadConfig({ BROWSER_WORKER_PROFILES: 'shop' })).toThrow(/BROWSER_WORKER_PROFILES/);
    expect(() => loadConfig({ BROWSER_WORKER_PROFILES: 'ta/shop/x' })).toThrow(/BROWSER_WORKER_PROFILES/);
  });

  it("does not unseal one tenant's sealed state as another tenant's profile of the same id", () => {
    const key = randomBytes(32);
    const blob = sealState({ cookies: [{ name: 'sid', value: 'a-secret' }] }, key, 'ta/shop');
    expect(unsealState(blob, key, 'ta/shop')).toEqual({ cookies: [{ name: 'sid', value: 'a-secret' }] });
    expect(() => unsealState(blob, key, 'tb/shop')).toThrow();
  });

  it('defaults frame_origins to none and subresources to any', () => {
    const profile = createProfileSchema.parse({
      id: 'shop',
      tenant: 'ta',
      principal: 'alice',
      allowed_origins: ['https://shop.example'],
    });
    expect(profile.frame_origins).toEqual([]);
    expect(profile.subresources).toBe('any');
  });
});
