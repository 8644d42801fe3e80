import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, WARM_CONTEXT_ESTIMATE_MB } from '../../libs/config/index.js';

describe('warm context settings', () => {
  it('keeps one warm context a profile by default, within 256 MiB', () => {
    const { browser } = loadConfig({});
    expect(browser.warmContexts).toBe(1);
    expect(browser.warmPoolMb).toBe(256);
  });

  it('refuses a memory bound below one context while warm contexts are on', () => {
    const refused = () => loadConfig({ BROWSER_WARM_CONTEXTS: '2', BROWSER_WARM_POOL_MB: '47' });
    expect(refused).toThrow(ConfigError);
    expect(refused).toThrow(/BROWSER_WARM_POOL_MB: expected at least 48/);
    expect(WARM_CONTEXT_ESTIMATE_MB).toBe(48);
  });

  it('takes warm contexts off with 0, whatever the memory bound', () => {
    expect(loadConfig({ BROWSER_WARM_CONTEXTS: '0', BROWSER_WARM_POOL_MB: '0' }).browser.warmContexts).toBe(
      0,
    );
  });

  it('refuses a negative or fractional count', () => {
    expect(() => loadConfig({ BROWSER_WARM_CONTEXTS: '-1' })).toThrow(/BROWSER_WARM_CONTEXTS/);
    expect(() => loadConfig({ BROWSER_WARM_CONTEXTS: '1.5' })).toThrow(/BROWSER_WARM_CONTEXTS/);
  });
});
