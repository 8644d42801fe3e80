import type {
  CreateProfile,
  LeaseCloseReason,
  LeaseScope,
  LeaseState,
  ProfileRef,
  SubresourcePolicy,
} from '../contracts/index.js';

/** A profile's settings as stored, without its sealed state (what listing reads). */
export interface ProfileSettings {
  id: string;
  tenant: string;
  principal: string;
  allowedOrigins: string[];
  /** Origins child frames may load besides the allowed ones (issue 11). */
  frameOrigins: string[];
  subresources: SubresourcePolicy;
  protected: boolean;
  sealedAtMs: number | undefined;
  createdAtMs: number;
}

/** A profile as stored: its sealed state is an encrypted blob, never shown by a route. */
export interface StoredProfile extends ProfileSettings {
  sealedBlob: string | undefined;
}

export interface LeaseRecord {
  id: string;
  /** The profile leased: its tenant and its id within the tenant. */
  profile: ProfileRef;
  providerRef: string;
  scope: LeaseScope;
  state: LeaseState;
  acquiredAtMs: number;
  expiresAtMs: number;
  sequence: number;
  effects: number;
  closeReason: LeaseCloseReason | undefined;
  sealed: boolean;
}

/** How long a lease may be granted at once, and in all (ADR-0127 d5: 15 and 60 minutes). */
export interface LeaseCaps {
  stepMs: number;
  lifetimeMs: number;
}

export type AcquireOutcome =
  | { status: 'created' | 'reattached'; leaseId: string }
  | { status: 'conflict'; leaseId: string; runId: string; attempt: number }
  | { status: 'expired'; leaseId: string };

export type RenewOutcome =
  | { status: 'renewed'; expiresAtMs: number }
  | { status: 'lease_expired' }
  | { status: 'not_found' };

export type BeginCloseOutcome =
  | { status: 'closing'; sealAllowed: boolean }
  | { status: 'in_progress' }
  | { status: 'closed'; reason: LeaseCloseReason; sealed: boolean }
  | { status: 'not_found' };

export type SequenceOutcome =
  | { status: 'ok'; sequence: number }
  | { status: 'sequence_mismatch'; current: number }
  | { status: 'lease_expired' }
  | { status: 'not_found' };

/** One renewal of a batch, under its own idempotency record (issue 18). */
export interface IdempotentRenewal {
  profile: ProfileRef;
  leaseId: string;
  requestedExpiresAtMs: number;
  /** The item's Idempotency-Key, shared with the single renew route's. */
  idempotencyKey: string;
  /** The request's hash as the single renew route computes it (method, path, canonical body). */
  requestHash: string;
}

/**
 * A renewal under its idempotency record: the record's answer when it was not claimed (`replay`,
 * `pending`, `conflict`), else the renewal's own (`renewed` with the lease after it).
 */
export type IdempotentRenewOutcome =
  | Exclude<IdempotencyClaim, { status: 'claimed' }>
  | { status: 'renewed'; lease: LeaseRecord }
  | { status: 'lease_expired' }
  | { status: 'not_found' };

/** A stored answer of an idempotent request, for `completeIdempotencies`. */
export interface IdempotentAnswerRecord {
  profile: ProfileRef;
  key: string;
  httpStatus: number;
  body: string;
}

export type IdempotencyClaim =
  | { status: 'claimed' }
  | { status: 'replay'; httpStatus: number; body: string }
  | { status: 'pending' }
  | { status: 'conflict' };

/** The lease rules' store, passed in (DESIGN §2): every change below is one Lua script. */
export interface LeaseStore {
  createProfile(profile: CreateProfile, nowMs: number): Promise<boolean>;
  /** The profile with its sealed state (acquire needs it); undefined if the tenant has no such profile. */
  getProfile(profile: ProfileRef): Promise<StoredProfile | undefined>;
  /** One tenant's profiles, read from that tenant's index alone, never their sealed state. */
  listProfiles(tenant: string): Promise<ProfileSettings[]>;
  /** Every tenant's profiles (start-up revocation of orphaned leases), names only. */
  listAllProfileRefs(): Promise<ProfileRef[]>;
  acquire(input: {
    profile: ProfileRef;
    newLeaseId: string;
    scope: LeaseScope;
    providerRef: string;
    requestedExpiresAtMs: number;
    nowMs: number;
    caps: LeaseCaps;
  }): Promise<AcquireOutcome>;
  getLease(profile: ProfileRef, leaseId: string): Promise<LeaseRecord | undefined>;
  liveLeaseId(profile: ProfileRef): Promise<string | undefined>;
  renew(
    profile: ProfileRef,
    leaseId: string,
    requestedExpiresAtMs: number,
    nowMs: number,
    caps: LeaseCaps,
  ): Promise<RenewOutcome>;
  beginClose(
    profile: ProfileRef,
    leaseId: string,
    nowMs: number,
    reason: LeaseCloseReason,
  ): Promise<BeginCloseOutcome>;
  finishClose(
    profile: ProfileRef,
    leaseId: string,
    nowMs: number,
    sealedBlob: string | undefined,
  ): Promise<{ sealed: boolean; reason: LeaseCloseReason }>;
  advanceSequence(
    profile: ProfileRef,
    leaseId: string,
    sequence: number,
    nowMs: number,
    advance: boolean,
  ): Promise<SequenceOutcome>;
  /**
   * Issue 18: many renewals, each claiming its own idempotency record and renewing in one script
   * (one slot per call), all in one pipeline; answers in the order given.
   */
  renewIdempotently(
    renewals: readonly IdempotentRenewal[],
    nowMs: number,
    caps: LeaseCaps,
  ): Promise<IdempotentRenewOutcome[]>;
  claimIdempotency(profile: ProfileRef, key: string, requestHash: string): Promise<IdempotencyClaim>;
  completeIdempotency(profile: ProfileRef, key: string, httpStatus: number, body: string): Promise<void>;
  /** Issue 18: many answers stored at once (one pipeline), as `completeIdempotency` stores one. */
  completeIdempotencies(answers: readonly IdempotentAnswerRecord[]): Promise<void>;
  releaseIdempotency(profile: ProfileRef, key: string): Promise<void>;
}
