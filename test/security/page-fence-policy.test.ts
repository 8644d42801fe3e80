import { describe, expect, it } from 'vitest';
import { fenceAllows } from '../../libs/browser/origin-guard.js';
import { compileFencePolicy } from '../../libs/browser/page-fence.js';

describe('the fence policy a profile compiles to', () => {
  const policy = compileFencePolicy({
    allowedOrigins: ['https://shop.example/', 'http://127.0.0.1:8080'],
    frameOrigins: ['https://pay.example'],
  });

  it('lets top-level pages reach the allowed origins only, never a frame origin', () => {
    expect(fenceAllows(policy, 'page', 'https://shop.example/cart?x=1')).toBe(true);
    expect(fenceAllows(policy, 'page', 'http://127.0.0.1:8080/')).toBe(true);
    expect(fenceAllows(policy, 'page', 'https://pay.example/checkout')).toBe(false);
    expect(fenceAllows(policy, 'page', 'http://shop.example/')).toBe(false);
    expect(fenceAllows(policy, 'page', 'https://shop.example:444/')).toBe(false);
    expect(fenceAllows(policy, 'page', 'file:///etc/passwd')).toBe(false);
  });

  it('lets child frames reach the allowed origins and the frame origins', () => {
    expect(fenceAllows(policy, 'frame', 'https://pay.example/embed')).toBe(true);
    expect(fenceAllows(policy, 'frame', 'https://shop.example/inner')).toBe(true);
    expect(fenceAllows(policy, 'frame', 'https://ads.example/')).toBe(false);
  });

  it('leaves subresources unrestricted unless the profile says allowed_origins', () => {
    expect(fenceAllows(policy, 'subresource', 'https://cdn.example/app.js')).toBe(true);
    const fenced = compileFencePolicy({
      allowedOrigins: ['https://shop.example'],
      frameOrigins: ['https://pay.example'],
      subresources: 'allowed_origins',
    });
    expect(fenceAllows(fenced, 'subresource', 'https://cdn.example/app.js')).toBe(false);
    expect(fenceAllows(fenced, 'subresource', 'https://pay.example/sdk.js')).toBe(true);
    expect(fenceAllows(fenced, 'subresource', 'https://shop.example/api')).toBe(true);
    // What never leaves the browser has no origin to fence.
    expect(fenceAllows(fenced, 'subresource', 'data:image/png;base64,AA==')).toBe(true);
    expect(fenceAllows(fenced, 'subresource', 'blob:https://shop.example/1')).toBe(true);
  });

  it('refuses a frame origin that is not an http(s) origin as a configuration error', () => {
    expect(() =>
      compileFencePolicy({ allowedOrigins: ['https://shop.example'], frameOrigins: ['javascript:x'] }),
    ).toThrow(/not an http\(s\) origin/);
  });
});
