import { setTimeout as sleep } from 'node:timers/promises';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import {
  grantRequestSchema,
  RUN_INPUT_MAX_CHARS,
  type RunStatus,
  recordIdSchema,
  runHasEnded,
} from '../../../libs/contracts/index.js';
import { scriptSchema } from '../../../libs/models/index.js';
import {
  answerRefusalsInOneShape,
  callRest,
  errorResult,
  type RestOutcome,
  toolResult,
} from './rest-call.js';
import { registerScheduleTools } from './schedule-tools.js';

/** How often `wait_for_run` reads the run again while it waits. */
const WAIT_POLL_MS = 500;
/** The longest a single `wait_for_run` call waits: a model's tool call should not hang for minutes. */
export const WAIT_FOR_RUN_MAX_SECONDS = 60;

/** Who the tools act as: the MCP session's key, presented to REST as the caller presented it. */
export interface RunsToolsCaller {
  app: FastifyInstance;
  /** The `authorization` header of the request that opened the MCP session (its key). */
  authorization: string;
}

const runId = recordIdSchema.describe('The run id, e.g. run_… (from submit_run).');

const submitRunInput = z.object({
  session_id: recordIdSchema
    .optional()
    .describe('An existing session (ses_…) to run in. Give this or profile_id, not both.'),
  profile_id: z
    .string()
    .min(1)
    .max(64)
    .optional()
    .describe(
      "A browser profile id: a new session bound to it is created with the tenant's default agent. Give this or session_id.",
    ),
  input: z.string().min(1).max(RUN_INPUT_MAX_CHARS).describe('The task, in plain words.'),
  script: scriptSchema
    .optional()
    .describe(
      'For agents on the scripted model only: the steps to take (browser.navigate, browser.observe, browser.act) and the final answer.',
    ),
  timeout_ms: z
    .number()
    .int()
    .min(1_000)
    .max(24 * 3600_000)
    .optional()
    .describe('The run deadline in milliseconds from submission (default one hour).'),
  idempotency_key: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,128}$/)
    .optional()
    .describe('Repeat a submission with the same key to get the same run back instead of a second run.'),
});

/** The statuses at which `wait_for_run` stops waiting besides an end: a person must act first. */
const NEEDS_A_PERSON: readonly RunStatus[] = ['waiting_user'];

/**
 * The runs mode's MCP server for one MCP session: submit a run, read it, wait for it, list and
 * decide its approvals. Every tool is one or two REST calls as the caller (see {@link callRest}),
 * so REST's scopes (runs:read to read, runs:write to submit, approvals:write to decide), tenancy and
 * errors hold unchanged; a REST error is the tool's `isError` answer with REST's error body.
 */
export function createRunsServer(caller: RunsToolsCaller): McpServer {
  const server = new McpServer({ name: 'leasehold-runs', version: '1.0.0' });
  answerRefusalsInOneShape(server);
  const rest = (request: Parameters<typeof callRest>[2]) =>
    callRest(caller.app, caller.authorization, request);

  server.registerTool(
    'submit_run',
    {
      title: 'Submit a run',
      description:
        'Starts a Leasehold run: a browser task carried out by the session agent under its leases, origin limits, budgets and approvals. Give session_id (an existing session) or profile_id (a new session bound to that browser profile is made for you). Answers the run (its id and status, usually queued) at once; then call wait_for_run with its id.',
      inputSchema: submitRunInput,
    },
    async (args) => {
      if ((args.session_id === undefined) === (args.profile_id === undefined))
        return errorResult('validation_failed', 'give exactly one of session_id or profile_id');
      let sessionId = args.session_id;
      if (sessionId === undefined) {
        const session = await rest({
          method: 'POST',
          url: '/v1/sessions',
          body: { browser_profile_id: args.profile_id },
        });
        if (!session.ok) return toolResult(session);
        sessionId = (session.body as { id: string }).id;
      }
      return toolResult(
        await rest({
          method: 'POST',
          url: `/v1/sessions/${sessionId}/runs`,
          body: {
            input: args.input,
            ...(args.script ? { script: args.script } : {}),
            ...(args.timeout_ms !== undefined ? { timeout_ms: args.timeout_ms } : {}),
          },
          ...(args.idempotency_key ? { headers: { 'idempotency-key': args.idempotency_key } } : {}),
        }),
      );
    },
  );

  server.registerTool(
    'get_run',
    {
      title: 'Get a run',
      description:
        "Reads a run now: its status (queued, running, parked, waiting_child, waiting_user, succeeded, failed, cancelled), its usage against its limits, its result or error once ended, and pending_approvals (actions waiting for a person's decision). Does not wait; use wait_for_run to wait.",
      inputSchema: z.object({ run_id: runId }),
      annotations: { readOnlyHint: true },
    },
    async (args) => toolResult(await rest({ method: 'GET', url: `/v1/runs/${args.run_id}` })),
  );

  server.registerTool(
    'wait_for_run',
    {
      title: 'Wait for a run',
      description: `Waits until the run ends (succeeded, failed, cancelled), stops on an action that needs approval or a request for a person to take the page over (pending_approvals is not empty: a person's has kind person; take over on the run page), or needs a person to sign in (waiting_user), or until timeout_seconds pass (at most ${WAIT_FOR_RUN_MAX_SECONDS}), then answers the run as get_run does. A run still running at the timeout is answered as it is: call wait_for_run again.`,
      inputSchema: z.object({
        run_id: runId,
        timeout_seconds: z
          .number()
          .int()
          .min(1)
          .max(WAIT_FOR_RUN_MAX_SECONDS)
          .optional()
          .describe(`Seconds to wait at most (default and maximum ${WAIT_FOR_RUN_MAX_SECONDS}).`),
      }),
      annotations: { readOnlyHint: true },
    },
    async (args, extra) => {
      const deadlineMs = Date.now() + (args.timeout_seconds ?? WAIT_FOR_RUN_MAX_SECONDS) * 1_000;
      for (;;) {
        const outcome = await rest({ method: 'GET', url: `/v1/runs/${args.run_id}` });
        if (!outcome.ok || waitIsOver(outcome) || Date.now() >= deadlineMs) return toolResult(outcome);
        const waitMs = Math.min(WAIT_POLL_MS, deadlineMs - Date.now());
        // The client cancelled its call (or went away): answer what is known now.
        const cancelled = await sleep(waitMs, false, { signal: extra.signal }).catch(() => true);
        if (cancelled) return toolResult(outcome);
      }
    },
  );

  server.registerTool(
    'list_approvals',
    {
      title: 'List pending approvals',
      description:
        "Lists the actions waiting for a person's decision in your tenant (optionally only those of one run): each with its id, run_id, the tool call it holds and why it needs approval. Decide one with decide_approval.",
      inputSchema: z.object({ run_id: runId.optional().describe('Only the approvals of this run.') }),
      annotations: { readOnlyHint: true },
    },
    async (args) =>
      toolResult(
        await rest({
          method: 'GET',
          url: args.run_id ? `/v1/approvals?run_id=${encodeURIComponent(args.run_id)}` : '/v1/approvals',
        }),
      ),
  );

  server.registerTool(
    'decide_approval',
    {
      title: 'Approve or deny an action',
      description:
        "Decides a pending approval: approve lets the held action go ahead (a grant lets later actions of the same run go ahead without asking, up to max_actions within duration_ms); deny refuses it with a reason the run's agent is told. Needs a key with approvals:write that may decide it (the run's own principal, or approvals:any). Answers the decided approval; the run then goes on.",
      inputSchema: z.object({
        approval_id: recordIdSchema.describe('The approval id, e.g. apr_… (from list_approvals or the run).'),
        decision: z.enum(['approve', 'deny']),
        reason: z.string().min(1).max(2_000).optional().describe('Why: required to deny.'),
        grant: grantRequestSchema
          .optional()
          .describe('With approve only: let further actions of the run go ahead without asking.'),
      }),
      annotations: { destructiveHint: false },
    },
    async (args) => {
      if (args.decision === 'deny' && args.reason === undefined)
        return errorResult('validation_failed', 'reason: required to deny');
      if (args.decision === 'deny' && args.grant !== undefined)
        return errorResult('validation_failed', 'grant: given with approve only');
      const body =
        args.decision === 'approve' ? (args.grant ? { grant: args.grant } : {}) : { reason: args.reason };
      return toolResult(
        await rest({ method: 'POST', url: `/v1/approvals/${args.approval_id}/${args.decision}`, body }),
      );
    },
  );

  registerScheduleTools(server, rest);
  return server;
}

/** True when a run view says waiting is over: an end, a pending approval, or a person needed. */
function waitIsOver(outcome: RestOutcome & { ok: true }): boolean {
  const run = outcome.body as { status: RunStatus; pending_approvals?: unknown[] };
  return (
    runHasEnded(run.status) || (run.pending_approvals?.length ?? 0) > 0 || NEEDS_A_PERSON.includes(run.status)
  );
}
