import { describe, expect, it } from 'vitest';
import { BROWSER_TOOLS_CONTRACT_VERSION } from '../../libs/contracts/index.js';
import { chatTool } from '../../libs/models/openai-chat-format.js';
import { BrowserLeaseProvider } from '../../libs/provider/index.js';
import {
  BOUND_TOOL_DEFINITIONS,
  BROWSER_TOOL_DEFINITIONS,
  BrowserToolExecutor,
} from '../../libs/runtime/index.js';

/**
 * The browser tools' contract version is part of what the model is told of each tool
 * (the openai-compatible adapter sends a tool's description as it is), and an execution says
 * which version its tools had, or none when it offers no browser tools.
 */
describe('the browser tools contract version', () => {
  it('is said in the description of every browser tool the model adapter sends', () => {
    expect(BROWSER_TOOL_DEFINITIONS.map((tool) => tool.name)).toEqual([
      'browser.navigate',
      'browser.observe',
      'browser.act',
    ]);
    for (const definition of BOUND_TOOL_DEFINITIONS) {
      const sent = chatTool(definition);
      expect(sent.type).toBe('function');
      expect(sent.type === 'function' && sent.function.description).toMatch(
        /\(browser tools contract 1\.6\.0\)$/,
      );
    }
    expect(BROWSER_TOOLS_CONTRACT_VERSION).toBe('1.6.0');
  });

  it('is the version of an execution that offers browser tools, and none of one that does not', () => {
    const provider = new BrowserLeaseProvider({
      scope: { tenant: 't1', principal: 'alice', run_id: 'run_1', attempt: 1 },
      profileId: 'shop',
      findWorker: async () => undefined,
      token: 'd'.repeat(32),
    });
    const bound = new BrowserToolExecutor(provider, Date.now() + 60_000);
    expect(bound.definitions()).toBe(BOUND_TOOL_DEFINITIONS);
    expect(bound.definitions().map((tool) => tool.name)).toEqual([
      'browser.navigate',
      'browser.observe',
      'browser.act',
      'browser.request_person',
    ]);
    expect(bound.contractVersion()).toBe('1.6.0');

    const unbound = new BrowserToolExecutor(undefined, Date.now() + 60_000);
    expect(unbound.definitions()).toEqual([]);
    expect(unbound.contractVersion()).toBeNull();
  });
});
