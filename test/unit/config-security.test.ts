import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { type Config, ConfigError, loadConfig } from '../../libs/config/index.js';

function refusal(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error('expected the configuration to be refused');
}

const PRODUCTION = { NODE_ENV: 'production' };
const STRONG_TOKEN = randomBytes(32).toString('hex');
const STRONG_SEAL_KEY = randomBytes(32).toString('base64');

/**
 * In production the two shared secrets must be real secrets: the data-plane token decodes (hex or
 * base64) to at least 32 bytes and the seal key to exactly 32, and neither is one character
 * repeated. A refusal is one line that names the setting and never echoes the value.
 */
describe('secrets in production', () => {
  it.each([
    ['40 spaces', ' '.repeat(40)],
    ['one character repeated', 'a'.repeat(64)],
    ['a value decoding to under 32 bytes', randomBytes(24).toString('hex')],
    ['text that is neither hex nor base64', 'correct horse battery staple, forty chars!'],
    ['the example placeholder', 'CHANGE_ME'],
  ])('refuses a data-plane token of %s', (_what, token) => {
    const message = refusal({ ...PRODUCTION, LEASEHOLD_DATA_PLANE_TOKEN: token });
    expect(message).toMatch(
      /^invalid configuration: LEASEHOLD_DATA_PLANE_TOKEN: expected .*32 (bytes|characters)/,
    );
    expect(message).not.toContain('\n');
    if (token.trim()) expect(message).not.toContain(token.trim());
  });

  it.each([
    ['a value decoding to 16 bytes', randomBytes(16).toString('base64')],
    ['a value decoding to 48 bytes', randomBytes(48).toString('hex')],
    ['one character repeated', 'A'.repeat(44)],
    ['one hex digit repeated', '0'.repeat(64)],
    ['40 spaces', ' '.repeat(40)],
  ])('refuses a seal key of %s', (_what, sealKey) => {
    const message = refusal({
      ...PRODUCTION,
      LEASEHOLD_DATA_PLANE_TOKEN: STRONG_TOKEN,
      LEASEHOLD_SEAL_KEY: sealKey,
    });
    expect(message).toMatch(/^invalid configuration: LEASEHOLD_SEAL_KEY: expected .*32 (bytes|characters)/);
    expect(message).not.toContain('\n');
  });

  it('takes the secrets the shipped examples make (openssl rand -hex 32, -base64 32), and the fleet’s own', () => {
    for (const [token, sealKey] of [
      [STRONG_TOKEN, randomBytes(32).toString('hex')],
      [randomBytes(32).toString('base64'), STRONG_SEAL_KEY],
      [randomBytes(32).toString('base64url'), randomBytes(32).toString('base64')],
    ] as const) {
      const config: Config = loadConfig({
        ...PRODUCTION,
        LEASEHOLD_DATA_PLANE_TOKEN: token,
        LEASEHOLD_SEAL_KEY: sealKey,
      });
      expect(config.secrets.dataPlaneToken).toBe(token);
      expect(config.secrets.sealKey).toBe(sealKey);
    }
  });

  it('takes previous seal keys as the seal key is taken, comma-separated, and refuses any that is not one', () => {
    const old = [randomBytes(32).toString('hex'), randomBytes(32).toString('base64')];
    const config = loadConfig({
      ...PRODUCTION,
      LEASEHOLD_DATA_PLANE_TOKEN: STRONG_TOKEN,
      LEASEHOLD_SEAL_KEY: STRONG_SEAL_KEY,
      LEASEHOLD_SEAL_KEYS_PREVIOUS: ` ${old[0]}, ${old[1]} `,
    });
    expect(config.secrets.previousSealKeys).toEqual(old);
    expect(loadConfig({}).secrets.previousSealKeys).toEqual([]);
    const short = randomBytes(16).toString('base64');
    const anywhere = refusal({ LEASEHOLD_SEAL_KEYS_PREVIOUS: `${old[0]},${short}` });
    expect(anywhere).toMatch(/^invalid configuration: LEASEHOLD_SEAL_KEYS_PREVIOUS: expected .*32 bytes/);
    expect(anywhere).not.toContain(short);
    // Production also refuses a key that decodes to 32 bytes but is one byte repeated.
    const weak = refusal({
      ...PRODUCTION,
      LEASEHOLD_DATA_PLANE_TOKEN: STRONG_TOKEN,
      LEASEHOLD_SEAL_KEY: STRONG_SEAL_KEY,
      LEASEHOLD_SEAL_KEYS_PREVIOUS: `${old[0]},${'0'.repeat(64)}`,
    });
    expect(weak).toMatch(/^invalid configuration: LEASEHOLD_SEAL_KEYS_PREVIOUS: expected in production/);
    expect(weak).not.toContain(old[0]);
  });

  it('keeps development as it was: a 32-character token passes there', () => {
    expect(
      loadConfig({ LEASEHOLD_DATA_PLANE_TOKEN: 'test-data-plane-token-0123456789abcdef' }).secrets
        .dataPlaneToken,
    ).toBe('test-data-plane-token-0123456789abcdef');
  });
});

describe('limits per tenant and sign-in settings', () => {
  it('has the documented defaults', () => {
    const config = loadConfig({});
    expect(config.api.mcpSessionsPerTenant).toBe(64);
    expect(config.api.mcpSessionsPerKey).toBe(16);
    expect(config.api.uiSessionsPerKey).toBe(5);
    expect(config.api.signInsPerMinute).toBe(20);
    expect(config.api.publicUrl).toBeUndefined();
  });

  it('reads the API’s public URL as its origin, and refuses one that is not http(s)', () => {
    expect(loadConfig({ API_PUBLIC_URL: 'https://leasehold.example.com/' }).api.publicUrl).toBe(
      'https://leasehold.example.com',
    );
    expect(refusal({ API_PUBLIC_URL: 'ftp://leasehold.example.com' })).toMatch(/API_PUBLIC_URL/);
    expect(refusal({ API_PUBLIC_URL: 'https://leasehold.example.com/app' })).toMatch(
      /API_PUBLIC_URL: expected .*origin/,
    );
  });

  it('refuses a limit below one', () => {
    for (const name of [
      'MCP_SESSIONS_PER_TENANT',
      'MCP_SESSIONS_PER_KEY',
      'UI_SESSIONS_PER_KEY',
      'SIGNINS_PER_MINUTE',
    ])
      expect(refusal({ [name]: '0' })).toContain(name);
  });
});
