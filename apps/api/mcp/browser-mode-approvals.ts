import { ApiError, type ApiKeyIdentity, mcpDriverKeyOf } from '../../../libs/contracts/index.js';
import type { RunStore } from '../../../libs/store/index.js';

/**
 * Issue 16: approvals of a run driven over MCP are never decided by the key that drives it — the
 * client that asked for an act may not let itself do it. Refused 403 before any decision; an
 * approval the key cannot see is left to the route's own answer (404).
 */
export async function refuseDrivingKey(
  store: Pick<RunStore, 'getApproval' | 'getRun'>,
  identity: ApiKeyIdentity,
  approvalId: string,
): Promise<void> {
  const approval = await store.getApproval(identity.tenant, approvalId);
  if (!approval) return;
  const run = await store.getRun(approval.run_id, identity.tenant);
  if (run && mcpDriverKeyOf(run) === identity.key_id)
    throw new ApiError(
      'forbidden',
      `approval ${approvalId} belongs to run ${run.id}, which this key drives over MCP; another key, the run page or the CLI decides it`,
    );
}
