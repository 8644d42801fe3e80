import { LeaseholdError } from '../contracts/index.js';
import type { ToolCall, ToolDefinition } from './model.js';

/**
 * The tool roster of a model request (DESIGN §7, ADR-0123 d3–d4 as amended by ADR-0130 d4): which
 * candidates the model gets as definitions, and which wait in the deferred index, reachable through
 * `tool.call` and found with `tool.search`. Nothing offered is ever skipped.
 */

export const TOOL_CALL_NAME = 'tool.call';
export const TOOL_SEARCH_NAME = 'tool.search';

export const TOOL_CALL_DEFINITION: ToolDefinition = Object.freeze({
  name: TOOL_CALL_NAME,
  description:
    'Call a tool of the deferred index by its exact name (find it first with tool.search), with its arguments.',
  parameters: {
    type: 'object',
    properties: {
      name: { type: 'string', description: 'The exact name of a deferred tool.' },
      arguments: { type: 'object', description: "The tool's arguments, as its parameters describe them." },
    },
    required: ['name', 'arguments'],
    additionalProperties: false,
  },
});

export const TOOL_SEARCH_DEFINITION: ToolDefinition = Object.freeze({
  name: TOOL_SEARCH_NAME,
  description:
    'Search the deferred index: tools not defined here, callable through tool.call. Returns their names, descriptions and parameters.',
  parameters: {
    type: 'object',
    properties: { query: { type: 'string', description: 'Words of the tool name or description.' } },
    required: ['query'],
    additionalProperties: false,
  },
});

const META_TOOLS = [TOOL_CALL_DEFINITION, TOOL_SEARCH_DEFINITION] as const;
const META_TOOL_NAMES: readonly string[] = META_TOOLS.map((tool) => tool.name);

export interface RosterInput {
  /** Every tool this request could offer: configured tools in their order, then discovered ones. */
  candidates: readonly ToolDefinition[];
  /**
   * Tools that must be defined, ahead of all others, in this order (in a bound session, the three
   * browser tools: ADR-0130 d4). Neither `deferred` nor overflow moves them.
   */
  required: readonly string[];
  /** The agent's deferral list: tools sent to the index even when there is room (ADR-0123). */
  deferred: readonly string[];
  /** Most definitions the request carries, `tool.call` and `tool.search` included. */
  definitionCap: number;
}

export interface RosterPlan {
  /** What the model is given, at most `definitionCap`; the two meta-tools last when the index is used. */
  defined: ToolDefinition[];
  /** Candidates left out of `defined`, in candidate order; callable through `tool.call`. */
  deferredIndex: ToolDefinition[];
}

export class RosterError extends LeaseholdError<'roster_invalid'> {
  override readonly name = 'RosterError';
  constructor(message: string) {
    super('roster_invalid', message);
  }
}

/**
 * Plans one request's roster. The cap counts every definition sent, so when anything is in the
 * index its two meta-tools take two of the slots. A plan that cannot define every required tool —
 * one not offered, or a cap too small for them (and the meta-tools, when the index is used) —
 * throws `RosterError` when it is built, never later in the run.
 */
export function planRoster(input: RosterInput): RosterPlan {
  const { definitionCap } = input;
  const byName = new Map<string, ToolDefinition>();
  for (const candidate of input.candidates) {
    if (META_TOOL_NAMES.includes(candidate.name))
      throw new RosterError(`a candidate tool takes the reserved name ${candidate.name}`);
    // The first of two same-named candidates wins: a configured tool over a discovered one.
    if (!byName.has(candidate.name)) byName.set(candidate.name, candidate);
  }
  const required = [...new Set(input.required)].map((name) => {
    const tool = byName.get(name);
    if (!tool) throw new RosterError(`the required tool ${name} is not offered to this request`);
    return tool;
  });
  if (required.length > definitionCap)
    throw new RosterError(
      `${definitionCap} definitions cannot hold the ${required.length} required tools (${names(required)})`,
    );

  const requiredNames = new Set(required.map((tool) => tool.name));
  const deferredNames = new Set(input.deferred.filter((name) => !requiredNames.has(name)));
  const others = [...byName.values()].filter((tool) => !requiredNames.has(tool.name));
  const eligible = others.filter((tool) => !deferredNames.has(tool.name));

  // Without an index every eligible tool must fit beside the required ones; otherwise the
  // meta-tools take two slots and the rest of the eligible tools overflow in order.
  const fitsWithoutIndex =
    eligible.length === others.length && required.length + others.length <= definitionCap;
  if (fitsWithoutIndex) return { defined: [...required, ...others], deferredIndex: [] };

  const room = definitionCap - required.length - META_TOOLS.length;
  if (room < 0)
    throw new RosterError(
      `${definitionCap} definitions cannot hold the ${required.length} required tools (${names(required)}) and ${names(META_TOOLS)}`,
    );
  const definedOthers = new Set(eligible.slice(0, room).map((tool) => tool.name));
  return {
    defined: [...required, ...others.filter((tool) => definedOthers.has(tool.name)), ...META_TOOLS],
    deferredIndex: others.filter((tool) => !definedOthers.has(tool.name)),
  };
}

/** `tool.search`: deferred tools whose name or description holds every word of the query. */
export function searchDeferredTools(plan: RosterPlan, query: string, limit = 20): ToolDefinition[] {
  const words = query
    .toLowerCase()
    .split(/[\s.,_/-]+/)
    .filter(Boolean);
  return plan.deferredIndex
    .filter((tool) => {
      const text = `${tool.name} ${tool.description}`.toLowerCase();
      return words.every((word) => text.includes(word));
    })
    .slice(0, limit);
}

/**
 * `tool.call`: the deferred call it stands for, with the outer call's id, so the loop runs it
 * (and the breaker counts it) as that tool. A name outside the index is refused `invalid_arguments`.
 */
export function resolveDeferredCall(
  plan: RosterPlan,
  call: ToolCall,
): { ok: true; call: ToolCall } | { ok: false; code: 'invalid_arguments'; message: string } {
  const { name, arguments: args } = call.args as { name?: unknown; arguments?: unknown };
  if (typeof name !== 'string' || typeof args !== 'object' || args === null || Array.isArray(args))
    return {
      ok: false,
      code: 'invalid_arguments',
      message: `${TOOL_CALL_NAME} expects {name: string, arguments: object}`,
    };
  if (!plan.deferredIndex.some((tool) => tool.name === name))
    return {
      ok: false,
      code: 'invalid_arguments',
      message: `no deferred tool named ${name}; defined tools are called directly`,
    };
  return { ok: true, call: { id: call.id, name, args: args as Record<string, unknown> } };
}

function names(tools: readonly ToolDefinition[]): string {
  return tools.map((tool) => tool.name).join(', ');
}
