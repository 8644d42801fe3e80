import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../libs/config/index.js';
import type { AgentDefinition } from '../../libs/contracts/index.js';
import {
  BROWSER_TASK_LIMITS_KEY,
  browserTaskLimits,
  defaultAgentDefinition,
  microUsdToUsd,
  runDefaultLimits,
  selectRunLimits,
  usdToMicroUsd,
} from '../../libs/runtime/index.js';

const config = loadConfig({});

function agent(metadata: Record<string, unknown> = {}): AgentDefinition {
  return { model: 'scripted', instructions: '', tools: [], limits: {}, metadata } as AgentDefinition;
}

describe('the browser-task overlay (ADR-0130 d1–d3)', () => {
  it('carries the overlay figures with the run_defaults reserves and a USD 30 cost limit', () => {
    expect(browserTaskLimits(config.limits)).toEqual({
      max_steps: 160,
      max_model_calls: 120,
      max_tool_calls: 160,
      reserve_model_calls: 2,
      reserve_tool_calls: 4,
      max_cost_micro_usd: 30_000_000,
      cost_reserve_micro_usd: 3_000_000,
    });
  });

  it("goes into the default agent's metadata only when browser tools are enabled", () => {
    const enabled = defaultAgentDefinition(config, { browserTools: true });
    expect(enabled.metadata[BROWSER_TASK_LIMITS_KEY]).toEqual(browserTaskLimits(config.limits));
    expect(enabled.tools).toEqual(
      expect.arrayContaining(['browser.navigate', 'browser.observe', 'browser.act']),
    );
    const disabled = defaultAgentDefinition(config, { browserTools: false });
    expect(disabled.metadata).not.toHaveProperty(BROWSER_TASK_LIMITS_KEY);
    expect(disabled.tools).not.toContain('browser.act');
  });

  it('makes a chat-model variant that copies the metadata', () => {
    const variant = defaultAgentDefinition(config, { browserTools: true, model: 'another-model' });
    expect(variant.model).toBe('another-model');
    expect(variant.metadata).toEqual(defaultAgentDefinition(config, { browserTools: true }).metadata);
  });
});

describe('which limits a run takes', () => {
  const overlaid = agent({ [BROWSER_TASK_LIMITS_KEY]: browserTaskLimits(config.limits) });

  it('gives a bound session on a version carrying the key the overlay', () => {
    expect(selectRunLimits(config.limits, { browser_profile_id: 'shop' }, overlaid).max_model_calls).toBe(
      120,
    );
  });

  it('keeps run_defaults for an unbound session, a version pinned before the overlay, and a custom agent', () => {
    const defaults = runDefaultLimits(config.limits);
    expect(selectRunLimits(config.limits, { browser_profile_id: null }, overlaid)).toEqual(defaults);
    expect(selectRunLimits(config.limits, { browser_profile_id: 'shop' }, agent())).toEqual(defaults);
  });

  it("applies a custom agent's own limits over run_defaults", () => {
    const custom = { ...agent(), limits: { max_steps: 10 } } as AgentDefinition;
    expect(selectRunLimits(config.limits, { browser_profile_id: 'shop' }, custom).max_steps).toBe(10);
  });
});

describe('USD amounts', () => {
  it('convert exactly between decimal strings and micro-USD', () => {
    expect(usdToMicroUsd('30')).toBe(30_000_000);
    expect(usdToMicroUsd('0.15')).toBe(150_000);
    expect(usdToMicroUsd('1.000001')).toBe(1_000_001);
    expect(microUsdToUsd(30_000_000)).toBe('30');
    expect(microUsdToUsd(150_000)).toBe('0.15');
    expect(microUsdToUsd(1_000_001)).toBe('1.000001');
  });
});
