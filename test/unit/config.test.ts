import { describe, expect, it } from 'vitest';
import { decodeKey } from '../../libs/config/env.js';
import { type Config, ConfigError, checkLimits, loadConfig } from '../../libs/config/index.js';

function load(env: Record<string, string>): Config {
  return loadConfig(env);
}

function errorOf(env: Record<string, string>): string {
  try {
    load(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error('expected the configuration to be refused');
}

describe('configuration', () => {
  it('works with an empty environment, using the documented defaults', () => {
    const config = load({});
    expect(config.http.apiPort).toBe(3000);
    expect(config.http.host).toBe('127.0.0.1');
    expect(config.redis.url).toBeUndefined();
    expect(config.redis.keyPrefix).toBe('lh:');
    expect(config.browser.pinnedProfiles).toBe('*');
    expect(config.runWorker.upkeepIntervalMs).toBe(60_000);
    expect(config.limits.browser_task.max_cost_usd).toBe('30');
    expect(config.models.default_model).toBe('scripted');
  });

  it('is frozen all the way down', () => {
    const config = load({});
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.http)).toBe(true);
    expect(Object.isFrozen(config.limits.run_defaults)).toBe(true);
    expect(() => {
      (config.http as { apiPort: number }).apiPort = 1;
    }).toThrow(TypeError);
  });

  it('stops on a bad value with one line naming the variable, what was expected and what was found', () => {
    const message = errorOf({ PORT: 'eighty' });
    expect(message).not.toContain('\n');
    expect(message).toMatch(/^invalid configuration: PORT: expected number.*got "eighty"$/);
  });

  it('names the variable for an out-of-range number', () => {
    expect(errorOf({ RUN_WORKER_CONCURRENCY: '0' })).toMatch(/RUN_WORKER_CONCURRENCY: .*got "0"/);
  });

  it('never echoes a secret it refuses', () => {
    const message = errorOf({ LEASEHOLD_DATA_PLANE_TOKEN: 'short-secret-value' });
    expect(message).toContain('LEASEHOLD_DATA_PLANE_TOKEN');
    expect(message).not.toContain('short-secret-value');
  });

  it('accepts a 32-byte seal key in hex or base64 and refuses any other length', () => {
    expect(load({ LEASEHOLD_SEAL_KEY: 'ab'.repeat(32) }).secrets.sealKey).toBe('ab'.repeat(32));
    // Kept as given; what the browser worker seals with is its decoding: the very 32 bytes.
    const base64 = Buffer.alloc(32, 7).toString('base64');
    const sealKey = load({ LEASEHOLD_SEAL_KEY: base64 }).secrets.sealKey;
    expect(sealKey).toBe(base64);
    expect(decodeKey(sealKey ?? '')).toEqual(Buffer.alloc(32, 7));
    expect(decodeKey('ab'.repeat(32))).toEqual(Buffer.alloc(32, 0xab));
    expect(errorOf({ LEASEHOLD_SEAL_KEY: Buffer.alloc(16).toString('base64') })).toMatch(
      /^invalid configuration: LEASEHOLD_SEAL_KEY: /,
    );
  });

  it('refuses a Redis URL of another scheme', () => {
    expect(errorOf({ REDIS_URL: 'http://127.0.0.1:6379' })).toMatch(/REDIS_URL: .*redis:\/\//);
  });

  it('reads the pinned profiles as a list of tenant/id and tenant/* pins, or a wildcard', () => {
    expect(load({ BROWSER_WORKER_PROFILES: 'ta/shop, ta/bank ,tb/*' }).browser.pinnedProfiles).toEqual([
      'ta/shop',
      'ta/bank',
      'tb/*',
    ]);
    expect(errorOf({ BROWSER_WORKER_PROFILES: 'ta/ok, ta/not ok' })).toMatch(/BROWSER_WORKER_PROFILES/);
    // A bare id names no tenant: ids are unique within a tenant only.
    expect(errorOf({ BROWSER_WORKER_PROFILES: 'shop' })).toMatch(/BROWSER_WORKER_PROFILES/);
  });

  it('reads the first hand-back wait after a fault, 1 s unless set, and refuses one past a minute', () => {
    expect(load({}).runWorker.handBackBaseMs).toBe(1_000);
    expect(load({ RUN_HANDBACK_BASE_MS: '250' }).runWorker.handBackBaseMs).toBe(250);
    expect(errorOf({ RUN_HANDBACK_BASE_MS: '0' })).toMatch(/RUN_HANDBACK_BASE_MS: .*got "0"/);
    expect(errorOf({ RUN_HANDBACK_BASE_MS: '60001' })).toMatch(/RUN_HANDBACK_BASE_MS: .*got "60001"/);
  });

  it('reads the live API keys a tenant may hold, 100 unless set, and refuses a bound of none', () => {
    expect(load({}).api.apiKeysPerTenant).toBe(100);
    expect(load({ API_KEYS_PER_TENANT: '5' }).api.apiKeysPerTenant).toBe(5);
    expect(errorOf({ API_KEYS_PER_TENANT: '0' })).toMatch(/API_KEYS_PER_TENANT: expected .*>=1/);
  });

  it('refuses an upkeep interval that would pass fewer than twice inside the five-minute renew window', () => {
    expect(load({ LEASE_UPKEEP_INTERVAL_MS: '150000' }).runWorker.upkeepIntervalMs).toBe(150_000);
    expect(errorOf({ LEASE_UPKEEP_INTERVAL_MS: '150001' })).toMatch(
      /^invalid configuration: LEASE_UPKEEP_INTERVAL_MS: expected at most 150000/,
    );
  });

  it('names the ops file when it cannot be read', () => {
    expect(errorOf({ LEASEHOLD_OPS_DIR: '/nonexistent-ops' })).toMatch(/limits\.yaml/);
  });
});

describe('limits file rules (ADR-0130 d3)', () => {
  const limits = load({}).limits;
  const copy = () => structuredClone(limits) as typeof limits;

  it('accepts the shipped limits', () => {
    expect(checkLimits(copy()).browser_task.max_model_calls).toBe(120);
  });

  it('refuses a reserve at its total', () => {
    const bad = copy();
    bad.run_defaults.reserve_model_calls = bad.run_defaults.max_model_calls;
    expect(() => checkLimits(bad)).toThrow(/reserve_model_calls: expected below max_model_calls/);
  });

  it('refuses a cost reserve at or above the cost limit', () => {
    const bad = copy();
    bad.browser_task.cost_reserve_usd = '30';
    expect(() => checkLimits(bad)).toThrow(/cost_reserve_usd: expected below max_cost_usd/);
  });

  it('refuses an overlay count below the run default', () => {
    const bad = copy();
    bad.browser_task.max_tool_calls = 63;
    expect(() => checkLimits(bad)).toThrow(
      /browser_task.max_tool_calls: expected at least run_defaults.max_tool_calls \(64\), got 63/,
    );
  });
});

describe('the egress allowance (LEASEHOLD_EGRESS_ALLOW_CIDRS)', () => {
  it('allows loopback by default outside production, and nothing in production', () => {
    expect(load({}).egress).toMatchObject({ allowCidrs: ['127.0.0.0/8', '::1/128'], allowSource: 'default' });
    expect(load({ NODE_ENV: 'test' }).egress.allowCidrs).toEqual(['127.0.0.0/8', '::1/128']);
    expect(load({ NODE_ENV: 'production' }).egress).toMatchObject({ allowCidrs: [], allowSource: 'default' });
  });

  it('takes the CIDRs an operator names, or none when the setting is empty', () => {
    const named = load({ NODE_ENV: 'production', LEASEHOLD_EGRESS_ALLOW_CIDRS: '10.0.0.0/8, fd00::/8' });
    expect(named.egress).toMatchObject({
      allowCidrs: ['10.0.0.0/8', 'fd00::/8'],
      allowSource: 'LEASEHOLD_EGRESS_ALLOW_CIDRS',
    });
    expect(load({ LEASEHOLD_EGRESS_ALLOW_CIDRS: '' }).egress.allowCidrs).toEqual([]);
  });

  it('refuses what is no CIDR at start-up', () => {
    for (const bad of ['10.0.0.0', '10.0.0.0/33', 'fd00::/129', 'localhost/8', '10.0.0.0/x'])
      expect(errorOf({ LEASEHOLD_EGRESS_ALLOW_CIDRS: bad })).toMatch(
        /^invalid configuration: LEASEHOLD_EGRESS_ALLOW_CIDRS/,
      );
  });

  it("names the fleet's own ports: the servers', and Redis's", () => {
    expect(load({}).egress.ownPorts).toEqual([3000, 3001, 3002, 3003, 6379]);
    const cluster = load({
      PORT: '0',
      BROWSER_WORKER_PORT: '8001',
      REDIS_CLUSTER_NODES: 'redis-a:7000,redis://redis-b:7001',
      QUEUE_PREFIX: '{bull}',
    });
    expect(cluster.egress.ownPorts).toEqual([3002, 3003, 7000, 7001, 8001]);
    expect(load({ REDIS_URL: 'redis://cache:6380/0' }).egress.ownPorts).toContain(6380);
  });
});
