import type { LeaseView, ProfileRef, ProfileView } from '../contracts/index.js';
import { DataPlaneError } from './errors.js';
import type { LeaseRecord, LeaseStore, ProfileSettings } from './ports.js';

/** A lease as the data plane answers it, read from the store now; an unknown lease is `not_found`. */
export async function readLeaseView(
  store: LeaseStore,
  profile: ProfileRef,
  leaseId: string,
): Promise<LeaseView> {
  const lease = await store.getLease(profile, leaseId);
  if (!lease) throw new DataPlaneError('not_found', `no lease ${leaseId}`);
  return leaseView(lease);
}

export function leaseView(lease: LeaseRecord): LeaseView {
  return {
    lease_id: lease.id,
    profile_id: lease.profile.id,
    provider_ref: lease.providerRef,
    scope: lease.scope,
    state: lease.state,
    acquired_at_ms: lease.acquiredAtMs,
    expires_at_ms: lease.expiresAtMs,
    sequence: lease.sequence,
    effects: lease.effects,
    close_reason: lease.closeReason ?? null,
    sealed: lease.sealed,
  };
}

export function profileView(profile: ProfileSettings): ProfileView {
  return {
    id: profile.id,
    tenant: profile.tenant,
    principal: profile.principal,
    allowed_origins: profile.allowedOrigins,
    frame_origins: profile.frameOrigins,
    subresources: profile.subresources,
    protected: profile.protected,
    // Set with the sealed state in one script (finishClose), so listing never reads the blob.
    sealed: profile.sealedAtMs !== undefined,
    sealed_at_ms: profile.sealedAtMs ?? null,
    seal_fault: profile.sealFault ?? null,
    created_at_ms: profile.createdAtMs,
  };
}
