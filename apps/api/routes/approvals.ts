import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import {
  APPROVAL_LIST_STATUSES,
  ApiError,
  type ApiKeyIdentity,
  approvalViewSchema,
  grantRequestSchema,
  REQUEST_PERSON_TOOL,
  recordIdSchema,
} from '../../../libs/contracts/index.js';
import { approvalListSchema } from '../../../libs/contracts/rest-views.js';
import type { RunStore } from '../../../libs/store/index.js';
import { authenticate, identityOf } from '../auth.js';
import { refuseDriverChain } from '../mcp/browser-mode-approvals.js';
import { answers, BODY_FAILURES, namedBody } from './openapi.js';
import { idParams, typed, type V1Dependencies } from './shared.js';

const approveBodySchema = namedBody(
  z.strictObject({ grant: grantRequestSchema.optional() }).default({}),
  'ApproveApproval',
  { grant: { duration_ms: 600_000, max_actions: 20 } },
);
const denyBodySchema = namedBody(z.strictObject({ reason: z.string().min(1).max(2_000) }), 'DenyApproval', {
  reason: 'Not this vendor',
});

/**
 * An approval is decided by its run's own principal, or by a key with `approvals:any`
 * (a tenant `admin` implies it, within its tenant); to anyone else it reads as absent (404).
 */
function approvalDecider(identity: ApiKeyIdentity) {
  const anyPrincipal = identity.scopes.includes('approvals:any') || identity.scopes.includes('admin');
  return { by: identity.principal, ownRunsOnly: !anyPrincipal };
}

/** The decided approval; what the decision caused (a re-queued run's next execution) follows. */
async function answerDecision(
  deps: V1Dependencies,
  tenant: string,
  approvalId: string,
  decision: Awaited<ReturnType<RunStore['approve']>>,
) {
  if (!decision.ok) {
    const code =
      decision.code === 'not_found'
        ? 'not_found'
        : decision.code === 'grant_out_of_bounds'
          ? 'validation_failed'
          : decision.code === 'person_in_control'
            ? 'person_in_control'
            : 'conflict';
    throw new ApiError(code, decision.message);
  }
  const found = await deps.store.getApproval(tenant, approvalId);
  if (!found) throw new ApiError('not_found', `approval ${approvalId} not found`);
  const [approval = found] = await deps.store.withGrants(found.run_id, [found]);
  // Observed by the API that decided it (a decision is made once: a repeat is refused above).
  if ((approval.status === 'approved' || approval.status === 'denied') && approval.decided_at_ms !== null)
    deps.metrics?.approvalWaited(approval.status, approval.created_at_ms, approval.decided_at_ms);
  // A request for a person answered without a takeover (the owner let the run go on, or said no).
  if (
    approval.tool === REQUEST_PERSON_TOOL &&
    (approval.status === 'approved' || approval.status === 'denied')
  )
    deps.metrics?.of('personRequests').inc({ outcome: approval.status });
  await deps.lifecycle.followUpById(approval.run_id);
  return approval;
}

/** Approvals (DESIGN §3): listed, approved (optionally with a task grant) or denied. */
export function registerApprovalRoutes(root: FastifyInstance, deps: V1Dependencies): void {
  const app = typed(root);
  const { store } = deps;

  app.get(
    '/v1/approvals',
    {
      schema: {
        tags: ['approvals'],
        operationId: 'listApprovals',
        summary: "The tenant's approvals: pending ones of one run or of all, or a run's of any status",
        description:
          "Pending ones by default. A run's approvals stay listed once decided or expired (`status`: `approved`, `denied`, `expired` or `any`, with `run_id`), each with who decided, when, the reason and the grant it gave; without `run_id` only pending ones are listed (422 otherwise).",
        querystring: z.object({
          run_id: recordIdSchema.optional(),
          status: z.enum(APPROVAL_LIST_STATUSES).default('pending'),
        }),
        response: answers({ 200: approvalListSchema }, 422),
      },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request) => {
      const { tenant } = identityOf(request);
      const { run_id: runId, status } = request.query;
      if (runId === undefined) {
        // The tenant's index holds pending approvals only: a decided one is kept with its run.
        if (status !== 'pending')
          throw new ApiError(
            'validation_failed',
            `status ${status} needs run_id: decided approvals are listed by run`,
          );
        return { approvals: await store.listPendingApprovals(tenant) };
      }
      if (status === 'pending') return { approvals: await store.listPendingApprovals(tenant, runId) };
      return { approvals: (await store.listRunApprovalsWithGrants(tenant, runId, status)) ?? [] };
    },
  );
  app.post(
    '/v1/approvals/:id/approve',
    {
      schema: {
        tags: ['approvals'],
        operationId: 'approveApproval',
        summary: 'Approve a pending approval, optionally with a task grant',
        description:
          'The run goes on with the approved call. A grant (at most 30 minutes and 200 actions) lets the run repeat such actions without asking again. The body may be left out.',
        params: idParams,
        body: approveBodySchema,
        response: answers({ 200: approvalViewSchema }, 403, 404, 409, ...BODY_FAILURES),
      },
      preHandler: authenticate(store, 'approvals:write'),
    },
    async (request) => {
      const identity = identityOf(request);
      await refuseDriverChain(store, identity, request.params.id);
      const decision = await store.approve(
        identity.tenant,
        request.params.id,
        approvalDecider(identity),
        request.body.grant,
      );
      return answerDecision(deps, identity.tenant, request.params.id, decision);
    },
  );
  app.post(
    '/v1/approvals/:id/deny',
    {
      schema: {
        tags: ['approvals'],
        operationId: 'denyApproval',
        summary: 'Deny a pending approval; the reason is what the model hears',
        params: idParams,
        body: denyBodySchema,
        response: answers({ 200: approvalViewSchema }, 403, 404, 409, ...BODY_FAILURES),
      },
      preHandler: authenticate(store, 'approvals:write'),
    },
    async (request) => {
      const identity = identityOf(request);
      await refuseDriverChain(store, identity, request.params.id);
      const decision = await store.deny(
        identity.tenant,
        request.params.id,
        approvalDecider(identity),
        request.body.reason,
      );
      return answerDecision(deps, identity.tenant, request.params.id, decision);
    },
  );
}
