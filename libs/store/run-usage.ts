import { type RunUsage, type UnverifiedError, unverifiedErrorSchema } from '../contracts/index.js';
import type { RunStoreContext } from './run-keys.js';
import { type RunTransition, toTransition } from './run-transition.js';

/**
 * What a running run's owner adds to its record as it goes: usage (steps, calls, cost), the
 * unverified mark (ADR-0177) and the browser tools' version. Owner-fenced like every
 * write to a running run.
 */

/** Adds to a running run's usage, by its owner. Cost in integer micro-USD. */
export async function addUsage(
  context: RunStoreContext,
  runId: string,
  ownerToken: string,
  delta: Partial<RunUsage>,
): Promise<RunTransition> {
  const counts = [delta.steps ?? 0, delta.model_calls ?? 0, delta.tool_calls ?? 0, delta.cost_micro_usd ?? 0];
  if (counts.some((value) => !Number.isSafeInteger(value) || value < 0)) {
    throw new RangeError(`usage deltas are non-negative integers, got ${JSON.stringify(delta)}`);
  }
  const reply = await context.redis.addUsage(context.keys.run(runId), ownerToken, ...counts);
  return toTransition(runId, reply, 'running');
}

/**
 * ADR-0177: marks a running run's outcome unverified, by its owner, with the exhausted
 * acquisition's last error (its stable code and message); the run view shows it whatever the end.
 */
export async function markUnverified(
  context: RunStoreContext,
  runId: string,
  ownerToken: string,
  error: UnverifiedError,
): Promise<RunTransition> {
  const reply = await context.redis.markUnverified(
    context.keys.run(runId),
    ownerToken,
    JSON.stringify(unverifiedErrorSchema.parse(error)),
    context.now(),
  );
  return toTransition(runId, reply, 'running');
}

/**
 * Notes on a running run, by its owner, the contract version of the browser tools its
 * execution offers (`1.3.0`); the run view shows the latest as `browser_tools_version`.
 */
export async function noteBrowserTools(
  context: RunStoreContext,
  runId: string,
  ownerToken: string,
  version: string,
): Promise<RunTransition> {
  const reply = await context.redis.noteBrowserTools(
    context.keys.run(runId),
    ownerToken,
    version,
    context.now(),
  );
  return toTransition(runId, reply, 'running');
}
