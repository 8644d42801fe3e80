import { ADR_0127 } from '../config/lease-numbers.js';
import {
  type ApprovalView,
  REQUEST_PERSON_TOOL,
  type RunView,
  requestPersonArgsSchema,
} from '../contracts/index.js';
import type { BrowserLeaseProvider } from '../provider/index.js';
import type { Invocation, PersonAccount, ToolPolicy } from '../runtime/loop-ports.js';
import type { ExecutionDeps } from './execution-deps.js';
import { refusedUnlessOk } from './run-lost.js';

/** The tool a takeover of a running run is recorded under (its `person` approval's). */
export const TAKEOVER_TOOL = 'person.takeover';

/**
 * One execution's side of a person on its page: a request for a person parks the run on a
 * `person` approval that expires (PERSON_REQUEST_TIMEOUT_MS, never past the run's deadline nor the
 * lease's sixty minutes: ADR-0127 d5, so the page it asks a person to act on is still there); a
 * takeover asked of the running run hands the page over at the loop's safe point and parks on a
 * held `person` approval, its lease kept and renewed as for any park on its own approval (d4).
 */
export function personPolicy(
  deps: ExecutionDeps,
  run: RunView,
  ownerToken: string,
  provider: BrowserLeaseProvider | undefined,
  cancelled: (ended: RunView) => void,
) {
  const clock = Date.now;
  let takeoversChecked = false;

  const asksForPerson = (invocation: Invocation) =>
    invocation.call.name === REQUEST_PERSON_TOOL &&
    provider !== undefined &&
    requestPersonArgsSchema.safeParse(invocation.call.args).success;

  async function park(invocation: Invocation): Promise<string> {
    const { reason } = requestPersonArgsSchema.parse(invocation.call.args);
    const now = clock();
    const acquiredAtMs = provider?.lease?.acquiredAtMs;
    const expiresAtMs = Math.min(
      now + deps.config.person.requestTimeoutMs,
      run.deadline_at_ms,
      acquiredAtMs !== undefined ? acquiredAtMs + ADR_0127.leaseLifetimeMs : Number.POSITIVE_INFINITY,
    );
    const { approvalId, transition } = await deps.store.requestApproval(run.id, ownerToken, {
      invocationId: invocation.id,
      tool: invocation.call.name,
      arguments: invocation.call.args,
      person: { reason, expires_at_ms: expiresAtMs },
    });
    refusedUnlessOk(transition, 'park');
    if (transition.detail === 'cancelled') cancelled(transition.run);
    return approvalId;
  }

  const policy: Pick<ToolPolicy, 'pauseForPerson' | 'personAccount' | 'takeoversToTell'> = {
    async pauseForPerson(holder) {
      const now = clock();
      const seconds = Math.floor(
        Math.min(deps.config.person.controlTimeoutMs, run.deadline_at_ms - now) / 1000,
      );
      const control = deps.pageControl;
      const startUrl = control && seconds >= 1 ? await control.currentUrl(run) : null;
      const started =
        control && seconds >= 1
          ? await control.start(run, holder, seconds).catch((error: unknown) => {
              deps.logger.warn({ run_id: run.id, err: error }, 'a takeover could not start; the run goes on');
              return undefined;
            })
          : undefined;
      if (!started) {
        await deps.store.releaseTakeover(run.id, run.tenant, run.principal, holder);
        return undefined;
      }
      const { approvalId, transition } = await deps.store.requestApproval(run.id, ownerToken, {
        invocationId: `${run.id}-a${run.attempt}-person-${started.sinceMs}`,
        tool: TAKEOVER_TOOL,
        arguments: null,
        person: {
          reason: 'taken over by its principal',
          expires_at_ms: started.untilMs,
          holder,
          since_ms: started.sinceMs,
          until_ms: started.untilMs,
          start_url: startUrl,
        },
      });
      if (transition.ok && transition.detail === 'cancelled') {
        cancelled(transition.run);
        await deps.pageControl?.end(run, holder).catch(() => undefined);
      }
      refusedUnlessOk(transition, 'park');
      return approvalId;
    },
    async personAccount(approvalId) {
      const approval = await deps.store.getApproval(run.tenant, approvalId);
      return approval ? accountOf(approval, clock()) : undefined;
    },
    async takeoversToTell(told) {
      // Takeovers end executions: those handed back are met by the next one's first turn alone.
      if (takeoversChecked) return [];
      takeoversChecked = true;
      const approvals = await deps.store.listApprovals(run.id);
      return approvals.flatMap((approval) => {
        if (approval.tool !== TAKEOVER_TOOL || approval.status !== 'approved' || told.has(approval.id))
          return [];
        const account = accountOf(approval, clock());
        return account ? [{ approvalId: approval.id, account }] : [];
      });
    },
  };
  return { asksForPerson, park, policy };
}

/** A `person` approval a person took over, as the run tells it; undefined when nobody did. */
function accountOf(approval: ApprovalView, nowMs: number): PersonAccount | undefined {
  const person = approval.person;
  if (!person?.holder || person.since_ms === null) return undefined;
  return {
    holder: person.holder,
    sinceMs: person.since_ms,
    endedAtMs: person.ended_at_ms ?? approval.decided_at_ms ?? nowMs,
    inputs: person.inputs,
    startUrl: person.start_url,
    endUrl: person.end_url,
  };
}
