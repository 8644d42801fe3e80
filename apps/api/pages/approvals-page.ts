import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ApprovalView, RunView } from '../../../libs/contracts/index.js';
import type { RunStore, UiSession } from '../../../libs/store/index.js';
import type { DecidableApproval } from '../../../libs/ui/index.js';
import { inDriverChain } from '../mcp/browser-mode-approvals.js';
import { readAsViewer } from './read-as-viewer.js';

/** The approvals page shows at most this many (newest first); the API lists them all. */
const APPROVALS_SHOWN = 100;

/**
 * The tenant's pending approvals this key may decide, read as the viewer: the same rules the
 * decision routes apply, so the page offers no card the API would refuse — `approvals:write`;
 * a run of the key's own principal unless it holds `approvals:any` (or `admin`); no run driven
 * over MCP by a key of its own creation chain. A person's request shows to its run's principal.
 */
export async function decidableApprovals(
  pages: FastifyInstance,
  request: FastifyRequest,
  session: UiSession,
  store: Pick<RunStore, 'apiKeyLineage'>,
): Promise<{ ok: true; pending: DecidableApproval[] } | { ok: false; problem: string }> {
  const { identity } = session;
  if (!identity.scopes.includes('approvals:write') && !identity.scopes.includes('admin'))
    return { ok: false, problem: 'This key may not decide approvals: it lacks the approvals:write scope.' };
  const list = await readAsViewer<{ approvals: ApprovalView[] }>(pages, request, '/v1/approvals');
  if (!list.ok) return { ok: false, problem: list.message };
  const anyPrincipal = identity.scopes.includes('approvals:any') || identity.scopes.includes('admin');
  const newest = [...list.body.approvals]
    .sort((a, b) => b.created_at_ms - a.created_at_ms)
    .slice(0, APPROVALS_SHOWN);
  const runs = new Map<string, RunView | undefined>();
  const pending: DecidableApproval[] = [];
  for (const approval of newest) {
    if (!runs.has(approval.run_id)) {
      const read = await readAsViewer<RunView>(
        pages,
        request,
        `/v1/runs/${encodeURIComponent(approval.run_id)}`,
      );
      runs.set(approval.run_id, read.ok ? read.body : undefined);
    }
    const run = runs.get(approval.run_id);
    if (!run) continue;
    const own = run.principal === identity.principal;
    if (approval.kind === 'person' ? !own : !own && !anyPrincipal) continue;
    if (await inDriverChain(store, identity, run)) continue;
    pending.push({ approval, run });
  }
  return { ok: true, pending };
}
