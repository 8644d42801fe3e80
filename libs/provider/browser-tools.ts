import type { z } from 'zod';
import {
  actArgsSchema,
  type BrowserObservation,
  navigateArgsSchema,
  observeArgsSchema,
  type PageArtifacts,
} from '../contracts/index.js';
import { ANSWER_MARGIN_MS } from './client.js';
import { ProviderError } from './errors.js';
import type { BrowserLeaseProvider } from './lease-provider.js';
import type { DispatchedEffect } from './lease-provider-options.js';

export const BROWSER_TOOL_NAMES = ['browser.navigate', 'browser.observe', 'browser.act'] as const;
export type BrowserToolName = (typeof BROWSER_TOOL_NAMES)[number];

/** One browser tool call's identity and limits, as the run loop gives them. */
export interface BrowserToolLimits {
  /** The durable invocation id (run, step, index): the acquisition identity (ADR-0177). */
  invocationId: string;
  /** The lease horizon the run asks for (epoch ms), computed once per invocation. */
  requestedLeaseExpiresAtMs: number;
  /** The tool call's deadline (epoch ms, wall clock), already bounded by the run's deadline. */
  deadlineMs: number;
  /** The run's cancellation. */
  signal?: AbortSignal;
}

export interface BrowserToolHooks {
  /**
   * Awaited right before an effect (navigate, act) is sent, after its arguments are valid and its
   * lease is held: the run loop marks the invocation `dispatched` here (the watermark: from now on
   * the effect may have happened), with the lease and sequence it goes out on. If it throws,
   * nothing is sent and its error is the call's.
   */
  beforeDispatch(effect: DispatchedEffect): Promise<void> | void;
}

export interface BrowserToolResult {
  observation: BrowserObservation;
  /** For the platform (breaker, evidence), never shown to the model nor stored in a result. */
  evidenceKey: string | null;
  /** What the browser worker captured beside the answer (never shown to the model). */
  artifacts: PageArtifacts;
}

/**
 * Runs one browser tool through the provider (DESIGN §6): arguments parsed by the contract's schemas
 * before anything is sent (`invalid_arguments`), the lease ensured, the effect watermark set through
 * `hooks.beforeDispatch`, and the call made once. Failures are {@link ProviderError}s.
 */
export async function executeBrowserTool(
  provider: BrowserLeaseProvider,
  name: BrowserToolName,
  args: unknown,
  limits: BrowserToolLimits,
  hooks: BrowserToolHooks,
): Promise<BrowserToolResult> {
  const calls = { deadlineMs: limits.deadlineMs, ...(limits.signal ? { signal: limits.signal } : {}) };
  switch (name) {
    case 'browser.navigate': {
      const parsed = parseArgs(name, navigateArgsSchema, args);
      const lease = await provider.ensureLease(limits.invocationId, limits.requestedLeaseExpiresAtMs, calls);
      await markDispatched(name, limits, hooks, lease);
      return toResult(await provider.navigate(parsed.url, calls));
    }
    case 'browser.observe': {
      const parsed = parseArgs(name, observeArgsSchema, args);
      await provider.ensureLease(limits.invocationId, limits.requestedLeaseExpiresAtMs, calls);
      return toResult(await provider.observe(parsed, calls));
    }
    case 'browser.act': {
      const parsed = parseArgs(name, actArgsSchema, args);
      const lease = await provider.ensureLease(limits.invocationId, limits.requestedLeaseExpiresAtMs, calls);
      await markDispatched(name, limits, hooks, lease);
      return toResult(await provider.act(parsed, calls));
    }
    default:
      return assertNever(name);
  }
}

function parseArgs<T extends z.ZodType>(name: BrowserToolName, schema: T, args: unknown): z.output<T> {
  const parsed = schema.safeParse(args);
  if (parsed.success) return parsed.data;
  // Issue messages name the field and what was expected; they do not echo the values sent.
  const issues = parsed.error.issues
    .slice(0, 3)
    .map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : 'arguments'}: ${issue.message}`)
    .join('; ');
  throw new ProviderError('invalid_arguments', `${name} arguments are invalid: ${issues}`, false, {
    operation: name === 'browser.navigate' ? 'navigate' : name === 'browser.observe' ? 'observe' : 'act',
  });
}

/**
 * The watermark goes down only when the effect will really be sent: a call already cancelled or out
 * of time is refused here, so the ledger never says `dispatched` for an effect that never left.
 */
async function markDispatched(
  name: BrowserToolName,
  limits: BrowserToolLimits,
  hooks: BrowserToolHooks,
  lease: { leaseId: string; sequence: number },
) {
  const operation = name === 'browser.navigate' ? 'navigate' : 'act';
  if (limits.signal?.aborted)
    throw new ProviderError('provider_unavailable', `${name} was not sent: the call was cancelled`, false, {
      operation,
      transport: 'cancelled',
    });
  if (limits.deadlineMs - Date.now() <= ANSWER_MARGIN_MS)
    throw new ProviderError(
      'provider_unavailable',
      `${name} was not sent: its deadline left no time`,
      false,
      {
        operation,
        transport: 'timeout',
      },
    );
  // The provider sends the effect with the lease's next sequence (BrowserLeaseProvider.navigate, act).
  await hooks.beforeDispatch({ leaseId: lease.leaseId, sequence: lease.sequence + 1 });
}

function toResult(result: {
  observation: BrowserObservation;
  evidenceKey: string | null;
  artifacts: PageArtifacts;
}): BrowserToolResult {
  return { observation: result.observation, evidenceKey: result.evidenceKey, artifacts: result.artifacts };
}

function assertNever(value: never): never {
  throw new ProviderError('invalid_arguments', `unknown browser tool ${String(value)}`, false, {
    operation: 'observe',
  });
}
