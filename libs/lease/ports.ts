import type {
  CreateProfile,
  LeaseCloseReason,
  LeaseScope,
  LeaseState,
  ProfileRef,
  SealFault,
  SubresourcePolicy,
  UploadRecord,
} from '../contracts/index.js';

/** A profile's settings as stored, without its sealed state (what listing reads). */
export interface ProfileSettings {
  id: string;
  tenant: string;
  principal: string;
  allowedOrigins: string[];
  /** Origins child frames may load besides the allowed ones. */
  frameOrigins: string[];
  subresources: SubresourcePolicy;
  protected: boolean;
  sealedAtMs: number | undefined;
  createdAtMs: number;
  /**
   * Names the profile's sealed state as it is now; every seal changes it. A warm context
   * restored from one version is never served once the profile is at another.
   */
  sealVersion: string;
  /** Why the sealed state last failed to open, and on which worker; undefined while it opens. */
  sealFault: SealFault | undefined;
}

/** A profile as stored: its sealed state is an encrypted blob, never shown by a route. */
export interface StoredProfile extends ProfileSettings {
  sealedBlob: string | undefined;
}

/**
 * The effect at a lease's last sequence: `dispatched` while it runs (or when its end was never
 * recorded), then `applied`, `refused` (after dispatch, with its code) or `unknown`; `skipped` when
 * a run's next owner advanced the sequence past a handed-over call that never reached the lease.
 */
export type EffectState = 'dispatched' | 'applied' | 'refused' | 'unknown' | 'skipped';
export interface LastEffect {
  state: EffectState;
  code: string | undefined;
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
  /** How the effect at `sequence` went, as the page calls recorded it; undefined before the first. */
  lastEffect: LastEffect | undefined;
  closeReason: LeaseCloseReason | undefined;
  sealed: boolean;
}

/** How long a lease may be granted at once, and in all (ADR-0127 d5: 15 and 60 minutes). */
export interface LeaseCaps {
  stepMs: number;
  lifetimeMs: number;
}

export type AcquireOutcome =
  /** Published now, with the profile's settings as they were when it was (its seal version). */
  | { status: 'created'; leaseId: string; lease: LeaseRecord; profile: ProfileSettings }
  | { status: 'reattached'; leaseId: string; lease: LeaseRecord }
  | { status: 'conflict'; leaseId: string; runId: string; attempt: number }
  | { status: 'expired'; leaseId: string }
  /** Admission refused: no such profile, not served by this worker, protected against the principal. */
  | { status: 'not_found' | 'not_served' | 'protected' }
  /** The idempotency key was not claimed (a replay, a request still answered, a conflict): nothing done. */
  | { status: 'idempotency'; claim: Exclude<IdempotencyClaim, { status: 'claimed' }> };

/** An Idempotency-Key and the hash of its request, claimed by the store call that does the work. */
export interface IdempotencyTicket {
  key: string;
  requestHash: string;
}

/** A profile's sealed state as stored (encrypted), with the seal version it is. */
export interface SealedState {
  blob: string | undefined;
  sealVersion: string;
}

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

/** One renewal of a batch, under its own idempotency record. */
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
  /**
   * Admission and publication in one script (DESIGN §5): the profile exists, is served here, and
   * is not protected against the scope's principal; only then the lease is published or reattached.
   */
  acquire(input: {
    profile: ProfileRef;
    /** Whether this worker's pins serve the profile (checked in the script after existence); default true. */
    served?: boolean;
    /** Claimed first, in the same script (a reattach in fewer round trips). */
    idempotency?: IdempotencyTicket;
    newLeaseId: string;
    scope: LeaseScope;
    providerRef: string;
    requestedExpiresAtMs: number;
    nowMs: number;
    caps: LeaseCaps;
  }): Promise<AcquireOutcome>;
  /**
   * Notes why the profile's sealed state did not open (or, with undefined, that it did): what the
   * profile's views show. A profile that does not exist is left so.
   */
  noteSealFault(profile: ProfileRef, fault: SealFault | undefined): Promise<void>;
  /** The profile's sealed state and its seal version, read together; undefined without the profile. */
  sealedState(profile: ProfileRef): Promise<SealedState | undefined>;
  getLease(profile: ProfileRef, leaseId: string): Promise<LeaseRecord | undefined>;
  liveLeaseId(profile: ProfileRef): Promise<string | undefined>;
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
    advance: boolean | 'skip',
    /**
     * The dispatch's own id: sent again with it after its answer was lost, an advance that
     * landed is told `ok`, not `sequence_mismatch`.
     */
    dispatchId?: string,
  ): Promise<SequenceOutcome>;
  /** Records how the effect at `sequence` ended, if it is still the lease's last and unrecorded. */
  noteEffect(
    profile: ProfileRef,
    leaseId: string,
    sequence: number,
    state: 'applied' | 'refused' | 'unknown',
    code?: string,
  ): Promise<void>;
  /**
   * Renewals (one, from the single renew route, or a batch's), each claiming its own
   * idempotency record and renewing in one script (one slot per call), all in one pipeline; answers
   * in the order given. The only way a lease is renewed.
   */
  renewIdempotently(
    renewals: readonly IdempotentRenewal[],
    nowMs: number,
    caps: LeaseCaps,
  ): Promise<IdempotentRenewOutcome[]>;
  claimIdempotency(profile: ProfileRef, key: string, requestHash: string): Promise<IdempotencyClaim>;
  completeIdempotency(profile: ProfileRef, key: string, httpStatus: number, body: string): Promise<void>;
  /** Many answers stored at once (one pipeline), as `completeIdempotency` stores one. */
  completeIdempotencies(answers: readonly IdempotentAnswerRecord[]): Promise<void>;
  releaseIdempotency(profile: ProfileRef, key: string): Promise<void>;
  /**
   * DESIGN §12: the declared secrets of the run a lease serves, sealed as the API stored them
   * (undefined: none). Optional: a store without it serves runs without secrets.
   */
  sealedRunSecrets?(runId: string): Promise<string | undefined>;
  /**
   * DESIGN §12: the upload `fileId` when the input of the run a lease serves lists it and it is
   * `tenant`'s (undefined otherwise): what an `upload` act may set a file input's files to.
   * Optional: a store without it serves no uploads.
   */
  runUpload?(runId: string, tenant: string, fileId: string): Promise<UploadRecord | undefined>;
}
