import type { FastifyInstance } from 'fastify';
import type { ApprovalView, RunFile, RunView } from '../../../libs/contracts/index.js';
import type { RunStore, UiSession } from '../../../libs/store/index.js';
import { markDoor, PUBLIC_ROUTE } from '../../../libs/telemetry/index.js';
import {
  PAGE_HEADERS,
  PAGE_SCRIPT,
  PAGE_SCRIPT_PATH,
  PAGE_STYLE,
  PAGE_STYLE_PATH,
  type PageViewer,
  type ProfileSignInView,
  renderApprovalsPage,
  renderProfileSignInPage,
  renderRunPage,
  renderRunsPage,
  runListParams,
  signInBeatMs,
} from '../../../libs/ui/index.js';
import { RUNS_QUEUE, runJobId } from '../../../queues/index.js';
import { DASHBOARD_PATH } from '../dashboard.js';
import { DRIVER_CHAIN_RULE, inDriverChain } from '../mcp/browser-mode-approvals.js';
import { decidableApprovals } from './approvals-page.js';
import { readAsViewer, readStepsAsViewer, runListFilters, runListQuery } from './read-as-viewer.js';
import { pageSession, registerSignIn, type SignInDependencies, toSignIn } from './signin.js';

export interface PageDependencies extends SignInDependencies {
  /** Whose keys may decide a run's approvals (an MCP-driven run's: none of its driver's chain). */
  store: Pick<RunStore, 'apiKeyLineage'>;
  /** A profile sign-in's lease past each heartbeat (`PROFILE_SIGN_IN_LEASE_MS`): its page beats well within it. */
  signInLeaseMs: number;
}

function viewerOf(session: UiSession): PageViewer {
  const { tenant, principal } = session.identity;
  return { tenant, principal, csrfToken: session.csrfToken };
}

/**
 * The run pages: `/runs`, `/runs/{id}`, the sign-in, and the pages' script and style.
 * They have their own door: a visit without a session goes to the sign-in instead of a 401, and
 * what they show they read from the /v1 routes as the session's key.
 */
export async function registerRunPages(app: FastifyInstance, deps: PageDependencies): Promise<void> {
  await app.register(async (pages) => {
    markDoor(pages, 'own');
    await registerSignIn(pages, deps);

    pages.get('/runs', async (request, reply) => {
      const session = await pageSession(request, deps.sessions);
      if (!session) return toSignIn(request, reply);
      const { filters, untidy } = runListFilters(request.query as Record<string, unknown>);
      // A form sends every field, set or not: the address keeps only those set.
      if (untidy) {
        const tidy = runListParams(filters).toString();
        return reply.redirect(`/runs${tidy ? `?${tidy}` : ''}`, 303);
      }
      const list = await readAsViewer<{ runs: RunView[]; next_cursor: string | null }>(
        pages,
        request,
        `/v1/runs?${runListQuery(filters)}`,
      );
      const page = renderRunsPage({
        viewer: viewerOf(session),
        filters,
        nowMs: Date.now(),
        runs: list.ok ? list.body.runs : [],
        nextCursor: list.ok ? list.body.next_cursor : null,
        ...(list.ok ? {} : { problem: list.message }),
      });
      return reply
        .code(list.ok || list.status !== 422 ? 200 : 422)
        .headers(PAGE_HEADERS)
        .send(page);
    });

    pages.get('/approvals', async (request, reply) => {
      const session = await pageSession(request, deps.sessions);
      if (!session) return toSignIn(request, reply);
      const decidable = await decidableApprovals(pages, request, session, deps.store);
      return reply.headers(PAGE_HEADERS).send(
        renderApprovalsPage({
          viewer: viewerOf(session),
          pending: decidable.ok ? decidable.pending : [],
          ...(decidable.ok ? {} : { problem: decidable.problem }),
        }),
      );
    });

    // A profile's sign-in by hand: its page live and held by the person, with Done and Cancel.
    pages.get('/profiles/:id/sign-ins/:signin', async (request, reply) => {
      const session = await pageSession(request, deps.sessions);
      if (!session) return toSignIn(request, reply);
      const { id, signin } = request.params as { id: string; signin: string };
      const read = await readAsViewer<ProfileSignInView>(
        pages,
        request,
        `/v1/profiles/${encodeURIComponent(id)}/sign-ins/${encodeURIComponent(signin)}`,
      );
      if (!read.ok)
        return reply
          .code(read.status)
          .headers(PAGE_HEADERS)
          .send(
            renderRunsPage({
              viewer: viewerOf(session),
              filters: {},
              runs: [],
              nextCursor: null,
              problem: read.message,
            }),
          );
      return reply.headers(PAGE_HEADERS).send(
        renderProfileSignInPage({
          viewer: viewerOf(session),
          signIn: read.body,
          beatMs: signInBeatMs(deps.signInLeaseMs),
        }),
      );
    });

    pages.get('/runs/:id', async (request, reply) => {
      const session = await pageSession(request, deps.sessions);
      if (!session) return toSignIn(request, reply);
      const runId = encodeURIComponent((request.params as { id: string }).id);
      const run = await readAsViewer<RunView & { pending_approvals: ApprovalView[] }>(
        pages,
        request,
        `/v1/runs/${runId}`,
      );
      if (!run.ok) {
        // Another tenant's run, or none: the page says no more than the API would (404).
        return reply
          .code(run.status)
          .headers(PAGE_HEADERS)
          .send(
            renderRunsPage({
              viewer: viewerOf(session),
              filters: {},
              runs: [],
              nextCursor: null,
              problem: run.message,
            }),
          );
      }
      const [steps, decisions, files] = await Promise.all([
        readStepsAsViewer(pages, request, runId),
        readAsViewer<{ approvals: ApprovalView[] }>(
          pages,
          request,
          `/v1/approvals?run_id=${runId}&status=any`,
        ),
        readAsViewer<{ files: RunFile[] }>(pages, request, `/v1/runs/${runId}/files`),
      ]);
      // The API refuses this key's decisions (403): the page offers none, and says why.
      const undecidable = await inDriverChain(deps.store, session.identity, run.body);
      const page = renderRunPage({
        viewer: viewerOf(session),
        run: run.body,
        approvals: run.body.pending_approvals,
        ...(undecidable
          ? {
              decisionRefused: `This key drives the run over MCP, or made or was made by the key that does, so it may not decide: ${DRIVER_CHAIN_RULE}.`,
            }
          : {}),
        steps: steps.ok ? steps.body.steps : [],
        files: files.ok ? files.body.files : [],
        ...(steps.ok ? {} : { stepsProblem: `Steps could not be read: ${steps.message}` }),
        decisions: decisions.ok ? decisions.body.approvals : [],
        ...(decisions.ok ? {} : { decisionsProblem: `Decisions could not be read: ${decisions.message}` }),
        // The dashboard shows every tenant's jobs: its link is for a fleet operator's key only.
        ...(session.identity.scopes.includes('operator')
          ? {
              queueJobUrl: `${DASHBOARD_PATH}/queue/${RUNS_QUEUE}/${runJobId(run.body.id, run.body.execution)}`,
            }
          : {}),
      });
      return reply.headers(PAGE_HEADERS).send(page);
    });
  });

  // The script and the style are the same for everyone and hold nothing of a tenant's.
  app.get(PAGE_SCRIPT_PATH, { config: PUBLIC_ROUTE }, async (_request, reply) =>
    reply
      .header('content-type', 'text/javascript; charset=utf-8')
      .header('cache-control', 'no-cache')
      .send(PAGE_SCRIPT),
  );
  app.get(PAGE_STYLE_PATH, { config: PUBLIC_ROUTE }, async (_request, reply) =>
    reply
      .header('content-type', 'text/css; charset=utf-8')
      .header('cache-control', 'no-cache')
      .send(PAGE_STYLE),
  );
}
