import type { FastifyInstance } from 'fastify';
import {
  ApiError,
  type ApiKeyIdentity,
  type ApprovalView,
  REQUEST_PERSON_TOOL,
  type RunView,
} from '../../../libs/contracts/index.js';
import { type PersonControlView, personControlViewSchema } from '../../../libs/contracts/rest-views.js';
import { personHolder } from '../../../libs/store/index.js';
import { authenticate, identityOf } from '../auth.js';
import { answers } from './openapi.js';
import { idParams, typed, type V1Dependencies } from './shared.js';

/** What a takeover of a run parked on an action's approval shows as its reason. */
const TAKEOVER_REASON = 'taken over by its principal';

/**
 * A person on a run's page (`person_control`): its principal takes the page over and hands it
 * back. A key of another principal (even with `approvals:any`) may watch, never take over: a
 * takeover is full control of another person's account. Another tenant's run is 404.
 */
export function registerPersonControlRoutes(root: FastifyInstance, deps: V1Dependencies): void {
  const app = typed(root);
  const { store } = deps;

  /** The caller's own run, or 404 (another tenant) or 403 (another principal of the tenant). */
  async function ownRun(identity: ApiKeyIdentity, runId: string): Promise<RunView> {
    const run = await store.getRun(runId, identity.tenant);
    if (!run) throw new ApiError('not_found', `run ${runId} not found`);
    if (run.principal !== identity.principal)
      throw new ApiError(
        'forbidden',
        'only the run’s own principal may take its page over; others may watch',
      );
    return run;
  }

  app.post(
    '/v1/runs/:id/takeover',
    {
      schema: {
        tags: ['runs'],
        operationId: 'takeOverRun',
        summary: 'Take a run’s page over',
        description:
          'The run’s principal takes its live page over: a parked run’s page is theirs at once (`held`); a running or queued run pauses at its next safe point, never inside an act (`pausing`; take over again or watch the run to see it held). The run keeps its lease meanwhile. One person at a time: while someone holds the page, anyone else is 409 `person_in_control`; another principal is 403 (a key with approvals:any may watch, never take over). A run without a live page, waiting for a child or the user, or ended, is 409. The takeover ends by itself after PERSON_CONTROL_TIMEOUT_MS. Takes no body.',
        params: idParams,
        response: answers({ 200: personControlViewSchema }, 403, 404, 409, 413, 422),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request) => {
      const identity = identityOf(request);
      // Another principal is refused by the script, after it says whether a person holds the page.
      const run = await store.getRun(request.params.id, identity.tenant);
      if (!run) throw new ApiError('not_found', `run ${request.params.id} not found`);
      const holder = personHolder(identity.principal);
      const control = deps.pageControl;
      if (!control) throw new ApiError('conflict', 'this deployment has no browser pages to take over');
      const now = Date.now();
      const seconds = Math.floor(
        Math.min(deps.config.person.controlTimeoutMs, run.deadline_at_ms - now) / 1000,
      );
      if (seconds < 1) throw new ApiError('conflict', `run ${run.id} is at its deadline`);
      // Read before the page is the person's: the URL they are given.
      const startUrl =
        run.status === 'parked' && run.principal === identity.principal
          ? await control.currentUrl(run)
          : null;
      const taken = await store.takeOverRun(run.id, {
        tenant: identity.tenant,
        principal: identity.principal,
        holder,
        untilMs: now + seconds * 1000,
        reason: TAKEOVER_REASON,
        startUrl,
      });
      if (!taken.ok) {
        if (taken.code === 'not_found') throw new ApiError('not_found', `run ${run.id} not found`);
        if (taken.code === 'not_principal')
          throw new ApiError('forbidden', 'only the run’s own principal may take it over');
        if (taken.code === 'person_in_control')
          throw new ApiError('person_in_control', 'another person holds this run’s page; you may watch it');
        throw new ApiError(
          'conflict',
          `run ${run.id} is ${taken.detail}: its page is not there to take over`,
        );
      }
      if (taken.state === 'pausing') {
        deps.metrics?.of('personTakeovers').inc({ run_status: 'running' });
        return view(run, 'pausing', holder, { approvalId: null });
      }
      const started = await control.start(run, holder, seconds).catch((error: unknown) => {
        request.log.warn({ run_id: run.id, err: error }, 'the page could not be handed over');
        return undefined;
      });
      if (!started) {
        await store.releaseTakeover(
          run.id,
          identity.tenant,
          identity.principal,
          holder,
          taken.created ? taken.approvalId : '',
        );
        throw new ApiError('conflict', `run ${run.id} has no live page to take over`);
      }
      if (taken.fresh) {
        deps.metrics?.of('personTakeovers').inc({ run_status: 'parked' });
        const approval = await store.getApproval(identity.tenant, taken.approvalId);
        if (approval?.tool === REQUEST_PERSON_TOOL)
          deps.metrics?.of('personRequests').inc({ outcome: 'taken_over' });
      }
      return view(run, 'held', holder, {
        approvalId: taken.approvalId,
        sinceMs: taken.sinceMs,
        untilMs: taken.untilMs,
        url: startUrl,
      });
    },
  );

  app.post(
    '/v1/runs/:id/handback',
    {
      schema: {
        tags: ['runs'],
        operationId: 'handBackRun',
        summary: 'Hand a run’s page back',
        description:
          'The person holding the run’s page gives it back: the run goes on from the page as they left it, its model told how long they held it, how many inputs they sent and the URL now, never what they typed. A takeover still pausing is called off. Anyone else is 409. Takes no body.',
        params: idParams,
        response: answers({ 200: personControlViewSchema }, 403, 404, 409, 413, 422),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request) => {
      const identity = identityOf(request);
      const run = await ownRun(identity, request.params.id);
      const holder = personHolder(identity.principal);
      const held = (await store.listApprovals(run.id)).find(
        (approval) =>
          approval.status === 'pending' && approval.kind === 'person' && approval.person?.holder === holder,
      );
      if (!held) {
        if ((await store.takeoverRequested(run.id))?.holder === holder) {
          await store.releaseTakeover(run.id, identity.tenant, identity.principal, holder);
          return view(run, 'handed_back', holder, { approvalId: null });
        }
        throw new ApiError('conflict', `you hold no takeover of run ${run.id}`);
      }
      const ended = await deps.pageControl?.end(run, holder);
      const endedAtMs = ended?.endedAtMs ?? Date.now();
      const decision = await store.handBack(identity.tenant, held.id, identity.principal, {
        holder,
        account: { ended_at_ms: endedAtMs, inputs: ended?.inputs ?? null, end_url: ended?.url ?? null },
      });
      if (!decision.ok) throw new ApiError('conflict', decision.message);
      observeTakeover(deps, held, endedAtMs, 'handed_back');
      // The run resumed (its last pending approval): its next execution is enqueued here.
      await deps.lifecycle.followUpById(run.id);
      return view(run, 'handed_back', holder, {
        approvalId: held.id,
        sinceMs: held.person?.since_ms ?? null,
        inputs: ended?.inputs ?? null,
        url: ended?.url ?? null,
      });
    },
  );
}

/** A takeover's time, from its start to its hand-back. */
export function observeTakeover(
  deps: Pick<V1Dependencies, 'metrics'>,
  approval: ApprovalView,
  endedAtMs: number,
  ended: 'handed_back' | 'time_limit',
): void {
  const sinceMs = approval.person?.since_ms;
  if (sinceMs === null || sinceMs === undefined) return;
  deps.metrics?.of('personTakeoverDuration').observe({ ended }, Math.max(0, endedAtMs - sinceMs) / 1000);
}

function view(
  run: RunView,
  state: PersonControlView['state'],
  holder: string,
  at: {
    approvalId: string | null;
    sinceMs?: number | null;
    untilMs?: number | null;
    inputs?: number | null;
    url?: string | null;
  },
): PersonControlView {
  return {
    run_id: run.id,
    state,
    holder,
    approval_id: at.approvalId,
    since_ms: at.sinceMs ?? null,
    until_ms: at.untilMs ?? null,
    inputs: at.inputs ?? null,
    url: at.url ?? null,
  };
}
