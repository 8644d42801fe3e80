import type { CreateProfile, LeaseCloseReason, LeaseScope, LeaseState } from '../contracts/index.js';

/** A profile as stored: its sealed state is an encrypted blob, never shown by a route. */
export interface StoredProfile {
  id: string;
  tenant: string;
  principal: string;
  allowedOrigins: string[];
  protected: boolean;
  sealedBlob: string | undefined;
  sealedAtMs: number | undefined;
  createdAtMs: number;
}

export interface LeaseRecord {
  id: string;
  profileId: string;
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

export type IdempotencyClaim =
  | { status: 'claimed' }
  | { status: 'replay'; httpStatus: number; body: string }
  | { status: 'pending' }
  | { status: 'conflict' };

/** The lease rules' store, passed in (DESIGN §2): every change below is one Lua script. */
export interface LeaseStore {
  createProfile(profile: CreateProfile, nowMs: number): Promise<boolean>;
  getProfile(profileId: string): Promise<StoredProfile | undefined>;
  listProfiles(): Promise<StoredProfile[]>;
  acquire(input: {
    profileId: string;
    newLeaseId: string;
    scope: LeaseScope;
    providerRef: string;
    requestedExpiresAtMs: number;
    nowMs: number;
    caps: LeaseCaps;
  }): Promise<AcquireOutcome>;
  getLease(profileId: string, leaseId: string): Promise<LeaseRecord | undefined>;
  liveLeaseId(profileId: string): Promise<string | undefined>;
  renew(
    profileId: string,
    leaseId: string,
    requestedExpiresAtMs: number,
    nowMs: number,
    caps: LeaseCaps,
  ): Promise<RenewOutcome>;
  beginClose(
    profileId: string,
    leaseId: string,
    nowMs: number,
    reason: LeaseCloseReason,
  ): Promise<BeginCloseOutcome>;
  finishClose(
    profileId: string,
    leaseId: string,
    nowMs: number,
    sealedBlob: string | undefined,
  ): Promise<{ sealed: boolean; reason: LeaseCloseReason }>;
  advanceSequence(
    profileId: string,
    leaseId: string,
    sequence: number,
    nowMs: number,
    advance: boolean,
  ): Promise<SequenceOutcome>;
  claimIdempotency(profileId: string, key: string, requestHash: string): Promise<IdempotencyClaim>;
  completeIdempotency(profileId: string, key: string, httpStatus: number, body: string): Promise<void>;
  releaseIdempotency(profileId: string, key: string): Promise<void>;
}
