import { describe, expect, it } from 'vitest';
import {
  BROWSER_TOOL_DEFINITIONS,
  DELEGATE_TOOL_DEFINITION,
  planRoster,
  RosterError,
  resolveDeferredCall,
  searchDeferredTools,
  TOOL_CALL_NAME,
  TOOL_SEARCH_NAME,
  type ToolDefinition,
} from '../../libs/runtime/index.js';

const REQUIRED = ['browser.navigate', 'browser.observe', 'browser.act'];
const tool = (name: string): ToolDefinition => ({
  name,
  description: `does ${name}`,
  parameters: { type: 'object' },
});
const names = (tools: readonly { name: string }[]) => tools.map((t) => t.name);

describe('tool roster (ADR-0130 d4)', () => {
  it('defines the required tools first, ahead of every configured tool', () => {
    const plan = planRoster({
      candidates: [tool('agent.delegate'), tool('memory.read'), ...BROWSER_TOOL_DEFINITIONS],
      required: REQUIRED,
      deferred: [],
      definitionCap: 10,
    });
    expect(names(plan.defined)).toEqual([...REQUIRED, 'agent.delegate', 'memory.read']);
    expect(plan.deferredIndex).toEqual([]);
  });

  it('defines the three browser tools under a small cap, with everything else reachable through the index', () => {
    const plan = planRoster({
      candidates: [tool('agent.delegate'), ...BROWSER_TOOL_DEFINITIONS, tool('mcp.a.x'), tool('mcp.a.y')],
      required: REQUIRED,
      deferred: [],
      definitionCap: 5,
    });
    expect(names(plan.defined)).toEqual([...REQUIRED, TOOL_CALL_NAME, TOOL_SEARCH_NAME]);
    expect(names(plan.deferredIndex)).toEqual(['agent.delegate', 'mcp.a.x', 'mcp.a.y']);
  });

  it('lets neither the deferral list nor overflow move a required tool to the index', () => {
    const plan = planRoster({
      candidates: [tool('a'), tool('b'), tool('c'), ...BROWSER_TOOL_DEFINITIONS],
      required: REQUIRED,
      deferred: ['browser.observe', 'a'],
      definitionCap: 6,
    });
    expect(names(plan.defined)).toEqual([...REQUIRED, 'b', TOOL_CALL_NAME, TOOL_SEARCH_NAME]);
    expect(names(plan.deferredIndex)).toEqual(['a', 'c']);
  });

  it('fills the cap in candidate order and moves the overflow to the index, skipping nothing', () => {
    const candidates = ['c1', 'c2', 'd1', 'd2', 'd3', 'd4'].map(tool);
    const plan = planRoster({ candidates, required: [], deferred: [], definitionCap: 5 });
    expect(names(plan.defined)).toEqual(['c1', 'c2', 'd1', TOOL_CALL_NAME, TOOL_SEARCH_NAME]);
    expect(names(plan.deferredIndex)).toEqual(['d2', 'd3', 'd4']);
    expect(plan.defined.length).toBeLessThanOrEqual(5);
  });

  it('defines no meta-tools when nothing is deferred', () => {
    const plan = planRoster({
      candidates: ['a', 'b', 'c'].map(tool),
      required: [],
      deferred: [],
      definitionCap: 3,
    });
    expect(names(plan.defined)).toEqual(['a', 'b', 'c']);
    expect(plan.deferredIndex).toEqual([]);
  });

  it('keeps the first of two candidates with the same name (configured before discovered)', () => {
    const configured = { ...tool('shared.name'), description: 'configured' };
    const plan = planRoster({
      candidates: [configured, tool('shared.name')],
      required: [],
      deferred: [],
      definitionCap: 4,
    });
    expect(plan.defined).toEqual([configured]);
  });

  it('fails the plan when the cap cannot hold the required tools', () => {
    const candidates = [...BROWSER_TOOL_DEFINITIONS];
    expect(() => planRoster({ candidates, required: REQUIRED, deferred: [], definitionCap: 2 })).toThrow(
      RosterError,
    );
    expect(
      planRoster({ candidates, required: REQUIRED, deferred: [], definitionCap: 3 }).defined,
    ).toHaveLength(3);
  });

  it('fails the plan when the cap cannot hold the required tools beside the two meta-tools', () => {
    const candidates = [...BROWSER_TOOL_DEFINITIONS, tool('extra'), tool('more')];
    expect(() => planRoster({ candidates, required: REQUIRED, deferred: [], definitionCap: 4 })).toThrow(
      /4 definitions/,
    );
    expect(() =>
      planRoster({ candidates, required: REQUIRED, deferred: ['extra'], definitionCap: 4 }),
    ).toThrow(RosterError);
    expect(
      names(planRoster({ candidates, required: REQUIRED, deferred: [], definitionCap: 5 }).defined),
    ).toEqual([...REQUIRED, 'extra', 'more']);
  });

  it('fails the plan when a required tool is not offered at all', () => {
    expect(() =>
      planRoster({
        candidates: BROWSER_TOOL_DEFINITIONS.slice(0, 2),
        required: REQUIRED,
        deferred: [],
        definitionCap: 10,
      }),
    ).toThrow(/browser\.act/);
  });

  it('refuses a candidate that takes a meta-tool name', () => {
    expect(() =>
      planRoster({ candidates: [tool(TOOL_CALL_NAME)], required: [], deferred: [], definitionCap: 10 }),
    ).toThrow(RosterError);
  });

  it('reaches a deferred tool through tool.call and finds it with tool.search', () => {
    const plan = planRoster({
      candidates: ['a', 'mcp.gmail.get_thread', 'mcp.gmail.list_labels'].map(tool),
      required: [],
      deferred: ['mcp.gmail.get_thread', 'mcp.gmail.list_labels'],
      definitionCap: 10,
    });
    expect(names(searchDeferredTools(plan, 'gmail thread'))).toEqual(['mcp.gmail.get_thread']);
    expect(names(searchDeferredTools(plan, 'LABELS'))).toEqual(['mcp.gmail.list_labels']);
    expect(
      resolveDeferredCall(plan, {
        id: 'c1',
        name: TOOL_CALL_NAME,
        args: { name: 'mcp.gmail.get_thread', arguments: { id: 't1' } },
      }),
    ).toEqual({ ok: true, call: { id: 'c1', name: 'mcp.gmail.get_thread', args: { id: 't1' } } });
    expect(
      resolveDeferredCall(plan, { id: 'c2', name: TOOL_CALL_NAME, args: { name: 'a', arguments: {} } }),
    ).toMatchObject({ ok: false, code: 'invalid_arguments' });
    expect(
      resolveDeferredCall(plan, { id: 'c3', name: TOOL_CALL_NAME, args: { arguments: {} } }),
    ).toMatchObject({ ok: false, code: 'invalid_arguments' });
  });
});

/**
 * The gate beside ADR-0123's: a production-shaped roster. Configured tools (the browser tools first
 * in the list, then the rest), then discovered MCP tools; the agent defers the mail-sending tools,
 * so the index and its two meta-tools exist in every chat.
 */
describe('production-shaped roster gate (ADR-0130 d4)', () => {
  const configured = [...BROWSER_TOOL_DEFINITIONS, DELEGATE_TOOL_DEFINITION];
  const discovered = [
    'mcp.gmail_work_read.get_attachment',
    'mcp.gmail_work_read.get_message',
    'mcp.gmail_work_read.get_thread',
    'mcp.gmail_work_read.list_labels',
    'mcp.gmail_work_read.search_threads',
    'mcp.gmail_work_send.create_draft',
    'mcp.gmail_work_send.send_message',
  ].map(tool);
  const deferred = ['mcp.gmail_work_send.create_draft', 'mcp.gmail_work_send.send_message'];
  const definitionCap = 8;
  const MOVED = [
    'mcp.gmail_work_read.get_thread',
    'mcp.gmail_work_read.list_labels',
    'mcp.gmail_work_read.search_threads',
  ];
  // An unbound session offers no browser tool and requires none.
  const unbound = planRoster({
    candidates: [DELEGATE_TOOL_DEFINITION, ...discovered],
    required: [],
    deferred,
    definitionCap,
  });
  const bound = planRoster({
    candidates: [...configured, ...discovered],
    required: REQUIRED,
    deferred,
    definitionCap,
  });

  it('keeps the unbound chat as it was: every read defined, only the deferred tools in the index', () => {
    expect(names(unbound.defined)).toEqual([
      'agent.delegate',
      'mcp.gmail_work_read.get_attachment',
      'mcp.gmail_work_read.get_message',
      ...MOVED,
      TOOL_CALL_NAME,
      TOOL_SEARCH_NAME,
    ]);
    expect(names(unbound.deferredIndex)).toEqual(deferred);
  });

  it('moves exactly three discovered reads to the index in a bound chat, which defines the browser tools first', () => {
    expect(names(bound.defined)).toEqual([
      ...REQUIRED,
      'agent.delegate',
      'mcp.gmail_work_read.get_attachment',
      'mcp.gmail_work_read.get_message',
      TOOL_CALL_NAME,
      TOOL_SEARCH_NAME,
    ]);
    const movedByBinding = names(bound.deferredIndex).filter(
      (name) => !names(unbound.deferredIndex).includes(name),
    );
    expect(movedByBinding).toEqual(MOVED);
  });

  it('skips nothing: every candidate is defined or reachable through tool.call', () => {
    const reachable = new Set([...names(bound.defined), ...names(bound.deferredIndex)]);
    for (const candidate of [...configured, ...discovered]) expect(reachable).toContain(candidate.name);
    for (const name of MOVED)
      expect(
        resolveDeferredCall(bound, { id: 'x', name: TOOL_CALL_NAME, args: { name, arguments: {} } }),
      ).toMatchObject({ ok: true, call: { name } });
  });
});
