import type { RunView } from '../contracts/index.js';
import { BOUNDED_ACQUIRE_RETRY, BrowserLeaseProvider, type HeldLease } from '../provider/index.js';
import {
  BrowserToolExecutor,
  DELEGATE_TOOL_NAME,
  type ExecutionEnd,
  type Invocation,
  ModelError,
  runExecution,
  type ToolPolicy,
} from '../runtime/index.js';
import { outputOption } from '../runtime/output-check.js';
import { buildApprovalCard } from './approval-card.js';
import { delegateToChild } from './children.js';
import type { ExecutionDeps } from './execution-deps.js';
import { closeOwnLease, endExecution } from './execution-end.js';
import { personPolicy } from './person-policy.js';
import { refusedUnlessOk } from './run-lost.js';
import { agentVersions, argumentSealing, budgetOptions, meteredModelFor } from './run-model.js';
import { StoreRunPort } from './store-run-port.js';

export type { ExecutionDeps } from './execution-deps.js';
export { RunLost } from './run-lost.js';

/** Tools that need the owner's approval unless a live task grant covers them (DESIGN §3). */
const APPROVAL_TOOLS = new Set(['browser.act']);

/**
 * One execution of a claimed run: the loop, then the run's new status, then — only when the run is
 * done with its page (an end, `waiting_user`, `waiting_child`) — its lease sealed and closed. The
 * status is read again after pending approvals are written, so a concurrent approval never reads as
 * an end (ADR-0127 d4).
 */
export async function executeRun(
  deps: ExecutionDeps,
  run: RunView,
  ownerToken: string,
  signal: AbortSignal,
): Promise<ExecutionEnd> {
  return (await executeRunToEnd(deps, run, ownerToken, signal)).end;
}

/** What the claim that gave this owner the run found, so the execution need not read it again. */
export interface ClaimedFacts {
  /** The run's current transcript was empty (only its owner writes it: it still is). */
  transcriptEmpty?: boolean;
}

/**
 * {@link executeRun}, answering also the run as its end left it (`after`: what the end wrote or
 * read again), so the caller need not read again what this process just wrote.
 */
export async function executeRunToEnd(
  deps: ExecutionDeps,
  run: RunView,
  ownerToken: string,
  signal: AbortSignal,
  claimed: ClaimedFacts = {},
): Promise<{ end: ExecutionEnd; after: RunView | undefined }> {
  await deps.faults?.('agent.load');
  const agent = await agentVersions(deps).get(run.tenant, run.agent_id, run.agent_version);
  const provider = leaseProvider(deps, run, ownerToken);
  const tools = new BrowserToolExecutor(provider, run.deadline_at_ms);
  const port = new StoreRunPort(deps, run, ownerToken, claimed);
  // A run records the contract version of the browser tools its model is offered.
  const toolsVersion = tools.contractVersion();
  if (toolsVersion && run.browser_tools_version !== toolsVersion) {
    await deps.faults?.('tools.note');
    refusedUnlessOk(
      await deps.store.noteBrowserTools(run.id, ownerToken, toolsVersion),
      'browser tools version',
    );
  }
  // A park or a wait that met a cancel ends the run in its own transition: this execution's end.
  let cancelledHere: RunView | undefined;
  const person = personPolicy(deps, run, ownerToken, provider, (ended) => {
    cancelledHere = ended;
  });
  const policy: ToolPolicy = {
    ...person.policy,
    async needsApproval(invocation: Invocation) {
      if (person.asksForPerson(invocation)) return true;
      if (!APPROVAL_TOOLS.has(invocation.call.name)) return false;
      await deps.faults?.('grant.consume');
      // DESIGN §3: a grant is used once per approved action.
      const use = await deps.store.consumeGrant(run.id, ownerToken, invocation.id);
      return !use.ok;
    },
    async park(invocation) {
      await deps.faults?.('approval.request');
      if (person.asksForPerson(invocation)) return person.park(invocation);
      // The card shows what will be acted on; a field that cannot be had stays null.
      // DESIGN §12: its outlined screenshot is named up front and taken beside the approval's
      // write, never in front of it.
      const { card, preview } = await buildApprovalCard(
        invocation,
        () => port.loadTranscript(),
        provider,
        run.deadline_at_ms,
        async (fileId) => (await deps.store.uploads.runUpload(run.id, run.tenant, fileId))?.name,
      );
      // Noted first, so the approval reads its picture `pending`, never missing, while it is taken.
      if (card.screenshot)
        await deps.store.notePreviewPending(run.id, card.screenshot).catch(() => undefined);
      const [{ approvalId, transition }, previewed] = await Promise.all([
        deps.store.requestApproval(run.id, ownerToken, {
          invocationId: invocation.id,
          tool: invocation.call.name,
          arguments: invocation.call.args,
          card,
        }),
        preview(),
      ]);
      if (card.screenshot && !previewed)
        await deps.store.noteScreenshotMissing(run.id, card.screenshot, 'not_taken').catch(() => undefined);
      refusedUnlessOk(transition, 'park');
      if (transition.detail === 'cancelled') cancelledHere = transition.run;
      return approvalId;
    },
    ...(agent?.tools.includes(DELEGATE_TOOL_NAME)
      ? {
          delegate: (invocation: Invocation) =>
            delegateToChild(deps, run, ownerToken, invocation, {
              releasePage: () => closeOwnLease(deps, run, provider),
              cancelled: (ended) => {
                cancelledHere = ended;
              },
            }),
        }
      : {}),
  };

  let end: ExecutionEnd;
  try {
    if (!agent) throw new ModelError(`agent version ${run.agent_version} not found`);
    end = await runExecution({
      run: port,
      model: meteredModelFor(deps, agent.model, run),
      tools,
      policy,
      limits: {
        maxSteps: run.limits.max_steps,
        maxModelCalls: run.limits.max_model_calls,
        maxToolCalls: run.limits.max_tool_calls,
        reserveModelCalls: run.limits.reserve_model_calls,
        reserveToolCalls: run.limits.reserve_tool_calls,
      },
      deadlineMs: run.deadline_at_ms,
      signal,
      ...(deps.stopping ? { stopSignal: deps.stopping } : {}),
      instructions: agent.instructions,
      // A parked call's secret arguments, sealed under the deployment's secret and run id.
      ...argumentSealing(deps.config, run.id),
      ...(await budgetOptions(deps, run, agent.model)),
      ...outputOption(run.input),
    });
  } catch (error) {
    if (!(error instanceof ModelError)) throw error;
    end = { kind: 'failed', code: 'model_error', detail: error.message };
  }
  const after = await endExecution(deps, run, ownerToken, end, { provider, cancelledHere });
  return { end, after };
}

/**
 * ADR-0127 d6: a lease this worker acquired for a run is kept up by this worker. Noted once per
 * lease: a provider holds one lease until it drops it, and a reattach after a drop is noted again.
 */
function upkeepNote(
  upkeep: NonNullable<ExecutionDeps['upkeep']>,
  run: Pick<RunView, 'id' | 'tenant'>,
): (lease: Readonly<HeldLease>) => Promise<void> {
  return (lease) =>
    upkeep.index.add(upkeep.workerId, run.id, {
      profile: { tenant: run.tenant, id: lease.profileId },
      leaseId: lease.leaseId,
    });
}

/** The run's lease provider: a bound run's, where this deployment has a data plane. */
function leaseProvider(
  deps: ExecutionDeps,
  run: RunView,
  ownerToken: string,
): BrowserLeaseProvider | undefined {
  const token = deps.config.secrets.dataPlaneToken;
  if (!run.browser_profile_id || !token) return undefined;
  return new BrowserLeaseProvider({
    scope: { tenant: run.tenant, principal: run.principal, run_id: run.id, attempt: run.attempt },
    profileId: run.browser_profile_id,
    findWorker: (profile) => deps.registry.findForProfile(profile),
    token,
    // ADR-0127 d7: another run's lease is sealed and replaced only once that run is done with its page.
    holderNeedsPage: (holderId) => deps.lifecycle.holderNeedsPage(holderId),
    ...(deps.upkeep ? { onLeaseHeld: upkeepNote(deps.upkeep, run) } : {}),
    // ADR-0177: acquisition alone is retried, three attempts at most, each failure on the run's events.
    acquireRetry: BOUNDED_ACQUIRE_RETRY,
    onAcquireAttempt: async (diagnostic) => {
      refusedUnlessOk(
        await deps.store.appendEvent(run.id, ownerToken, 'tool.acquire_attempt', { ...diagnostic }),
        'event',
      );
    },
  });
}
