import { type RunView, runNeedsPage } from '../contracts/index.js';
import type { BrowserLeaseProvider } from '../provider/index.js';
import type { ExecutionEnd } from '../runtime/index.js';
import type { RunStore } from '../store/index.js';
import type { ExecutionDeps } from './execution-deps.js';
import { refusedUnlessOk } from './run-lost.js';

/** What the execution leaves for its end: its lease provider, and an end a park or wait met. */
export interface ExecutionLeftovers {
  provider: BrowserLeaseProvider | undefined;
  /** The run as a park or a wait of this execution left it when that transition cancelled it. */
  cancelledHere: RunView | undefined;
}

/**
 * The end of an execution: the loop's end recorded by this owner, the run's status read again
 * after its approvals were written (ADR-0127 d4), the lease sealed and closed only if the run is
 * done with the page, then — for an ended run — its consequences through the lifecycle, after the
 * page is released, so a waiting parent (same profile) finds the page free. An end this
 * execution recorded is followed up (and counted, once) even when what comes after it fails.
 * Answers the run as this end read or wrote it last (undefined if it could not be read).
 */
export async function endExecution(
  deps: ExecutionDeps,
  run: RunView,
  ownerToken: string,
  end: ExecutionEnd,
  leftovers: ExecutionLeftovers,
): Promise<RunView | undefined> {
  await deps.faults?.('end.record');
  const ended = (await recordEnd(deps.store, run, ownerToken, end)) ?? leftovers.cancelledHere;
  let after = ended;
  try {
    await deps.faults?.('end.read');
    // ADR-0127 d4: read the status again, after the approvals were written.
    after ??= await deps.store.getRun(run.id);
    await deps.faults?.('lease.close');
    if (!after || !runNeedsPage(after.status)) await closeOwnLease(deps, run, leftovers.provider);
    else await closeRetired(deps, run, leftovers.provider);
  } finally {
    // Done with the page: its consequences (the profile's turn passed, a parent resumed, the end
    // counted) follow here. A parked run keeps its page and its turn; its follow-up tells the
    // webhooks of its approvals.
    if (after && (!runNeedsPage(after.status) || after.status === 'parked'))
      await deps.lifecycle.followUp(after, { ended: after === ended });
  }
  return after;
}

/** The loop's end as this owner writes it; a park or a wait is the loop's own transition. */
async function recordEnd(
  store: RunStore,
  run: RunView,
  ownerToken: string,
  end: ExecutionEnd,
): Promise<RunView | undefined> {
  switch (end.kind) {
    case 'succeeded':
      return finished(
        await store.finishRun(
          run.id,
          ownerToken,
          {
            status: 'succeeded',
            result: { answer: end.answer, ...(end.output !== undefined ? { output: end.output } : {}) },
          },
          run.attempt,
        ),
      );
    case 'failed':
      return finished(
        await store.finishRun(
          run.id,
          ownerToken,
          {
            status: 'failed',
            code: end.code,
            message: end.detail,
            ...(end.step !== undefined ? { step: end.step } : {}),
          },
          run.attempt,
        ),
      );
    case 'cancelled': {
      const cancelled = await store.finishRun(
        run.id,
        ownerToken,
        { status: 'cancelled', ...(end.detail !== undefined ? { message: end.detail } : {}) },
        run.attempt,
      );
      return cancelled.ok ? cancelled.run : undefined;
    }
    case 'parked':
    case 'waiting_child':
      return undefined;
  }
}

function finished(transition: Awaited<ReturnType<RunStore['finishRun']>>): RunView {
  refusedUnlessOk(transition, 'finish');
  return transition.run;
}

/** Seals and closes the run's lease, if it holds one; a failure is left to the upkeep. */
export async function closeOwnLease(
  deps: Pick<ExecutionDeps, 'logger'>,
  run: RunView,
  provider: BrowserLeaseProvider | undefined,
): Promise<void> {
  await provider
    ?.close({ seal: true })
    .catch((error: unknown) =>
      deps.logger.warn(
        { run_id: run.id, err: error },
        'lease close at the end of the run failed; the upkeep will close it',
      ),
    );
}

/** The run keeps its page; a lease it stopped trusting must not be there for its resume. */
async function closeRetired(
  deps: Pick<ExecutionDeps, 'logger'>,
  run: RunView,
  provider: BrowserLeaseProvider | undefined,
): Promise<void> {
  await provider
    ?.closeRetired({ deadlineMs: Date.now() + 15_000 })
    .catch((error: unknown) =>
      deps.logger.warn(
        { run_id: run.id, err: error },
        'closing a retired lease failed; the next acquire closes it',
      ),
    );
}
