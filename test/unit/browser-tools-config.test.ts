import { describe, expect, it } from 'vitest';
import { browserToolsLine, browserToolsState, ConfigError, loadConfig } from '../../libs/config/index.js';

const TOKEN = 'a-data-plane-token-of-at-least-32-characters';

describe('whether runs get browser tools', () => {
  it('refuses production without a data-plane token, naming the token and the switch', () => {
    const config = loadConfig({ NODE_ENV: 'production' });
    expect(() => browserToolsState(config)).toThrow(ConfigError);
    expect(() => browserToolsState(config)).toThrow(
      /LEASEHOLD_DATA_PLANE_TOKEN.*LEASEHOLD_BROWSER_TOOLS=off/,
    );
  });

  it('takes production without a token when browser tools are switched off on purpose', () => {
    const config = loadConfig({ NODE_ENV: 'production', LEASEHOLD_BROWSER_TOOLS: 'off' });
    expect(browserToolsState(config)).toBe('disabled');
    expect(browserToolsLine(config)).toBe('browser tools disabled (LEASEHOLD_BROWSER_TOOLS=off)');
  });

  it('enables them wherever a token is set, and says so', () => {
    const config = loadConfig({ NODE_ENV: 'production', LEASEHOLD_DATA_PLANE_TOKEN: TOKEN });
    expect(browserToolsState(config)).toBe('enabled');
    expect(browserToolsLine(config)).toContain('enabled');
  });

  it('disables them outside production without a token, and says the setting', () => {
    const config = loadConfig({ NODE_ENV: 'development' });
    expect(browserToolsState(config)).toBe('disabled');
    expect(browserToolsLine(config)).toContain('LEASEHOLD_DATA_PLANE_TOKEN is unset');
  });

  it('refuses a value other than on or off', () => {
    expect(() => loadConfig({ LEASEHOLD_BROWSER_TOOLS: 'maybe' })).toThrow(/LEASEHOLD_BROWSER_TOOLS/);
  });
});
