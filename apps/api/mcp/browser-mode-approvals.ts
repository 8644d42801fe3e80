import {
  ApiError,
  type ApiKeyIdentity,
  inCreationChain,
  mcpDriverOf,
} from '../../../libs/contracts/index.js';
import type { RunStore } from '../../../libs/store/index.js';

/** What a person is told where a key may not decide a run's approvals (the run page says it too). */
export const DRIVER_CHAIN_RULE =
  'it is decided with a key that did not create, and was not created by, the key driving this run';

/**
 * Approvals of a run driven over MCP are never decided by the agent's own keys — the
 * client that asked for an act may not let itself do it. Not the driving key, and no key of its
 * creation chain: a key that made it (transitively) or that it made (transitively), which an agent
 * holding the driver could have in hand (an admin driving key mints itself an approver). Another
 * key of the same principal outside that chain may decide. Each key keeps its makers, and the run
 * keeps its driver's, so revoking a link of the chain hides nothing. Two keys issued apart and held
 * by one agent are beyond what the API can tell.
 */
export async function inDriverChain(
  store: Pick<RunStore, 'apiKeyLineage'>,
  identity: ApiKeyIdentity,
  run: { input: unknown },
): Promise<boolean> {
  const driver = mcpDriverOf(run);
  if (!driver) return false;
  if (identity.key_id === driver.driver_key_id) return true;
  const approver = await store.apiKeyLineage(identity.tenant, identity.key_id);
  // Revoked since it was let in: nothing is left to show it outside the chain.
  if (!approver) return true;
  // A run begun before runs kept their driver's makers reads them from the driver's key, if live.
  const makers =
    driver.driver_makers ?? (await store.apiKeyLineage(identity.tenant, driver.driver_key_id))?.makers ?? [];
  return inCreationChain(approver, { keyId: driver.driver_key_id, makers });
}

/**
 * Refuses 403, before any decision, a key of the driver's creation chain (see {@link inDriverChain}),
 * naming the approval alone. An approval the key cannot see is left to the route's own answer (404).
 */
export async function refuseDriverChain(
  store: Pick<RunStore, 'getApproval' | 'getRun' | 'apiKeyLineage'>,
  identity: ApiKeyIdentity,
  approvalId: string,
): Promise<void> {
  const approval = await store.getApproval(identity.tenant, approvalId);
  if (!approval) return;
  const run = await store.getRun(approval.run_id, identity.tenant);
  if (run && (await inDriverChain(store, identity, run)))
    throw new ApiError(
      'forbidden',
      `approval ${approvalId} waits in a run driven over MCP by this key or by a key of its creation chain (one that made it, or that it made); ${DRIVER_CHAIN_RULE}`,
    );
}
