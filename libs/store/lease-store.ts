import type { Redis } from 'ioredis';
import type { CreateProfile, LeaseCloseReason, LeaseState } from '../contracts/index.js';
import type {
  AcquireOutcome,
  BeginCloseOutcome,
  IdempotencyClaim,
  LeaseCaps,
  LeaseRecord,
  LeaseStore,
  RenewOutcome,
  SequenceOutcome,
  StoredProfile,
} from '../lease/ports.js';
import { withScripts } from './scripts.js';

/** How long a closed lease's record is kept, so late calls read `lease_expired`. */
const CLOSED_RETENTION_MS = 24 * 3600_000;
/** How long an idempotency record answers replays. */
const IDEMPOTENCY_TTL_MS = 24 * 3600_000;

/**
 * Profiles, leases and idempotency records in Redis. A profile's keys share the hash tag
 * `{prf:ID}`, so every lease script touches one Redis Cluster slot.
 */
export class RedisLeaseStore implements LeaseStore {
  readonly #redis: ReturnType<typeof withScripts>;

  constructor(
    redis: Redis,
    private readonly prefix: string,
  ) {
    this.#redis = withScripts(redis);
  }

  #profileTag(profileId: string): string {
    return `${this.prefix}{prf:${profileId}}`;
  }
  #profileKey(profileId: string): string {
    return `${this.#profileTag(profileId)}:profile`;
  }
  #liveKey(profileId: string): string {
    return `${this.#profileTag(profileId)}:live`;
  }
  #leasePrefix(profileId: string): string {
    return `${this.#profileTag(profileId)}:lease:`;
  }
  #leaseKey(profileId: string, leaseId: string): string {
    return `${this.#leasePrefix(profileId)}${leaseId}`;
  }
  #profilesKey(): string {
    return `${this.prefix}profiles`;
  }

  async createProfile(profile: CreateProfile, nowMs: number): Promise<boolean> {
    const created = await this.#redis.createProfile(
      this.#profileKey(profile.id),
      this.#profilesKey(),
      profile.id,
      profile.tenant,
      profile.principal,
      JSON.stringify(profile.allowed_origins),
      profile.protected ? 1 : 0,
      nowMs,
    );
    return created === 1;
  }

  async getProfile(profileId: string): Promise<StoredProfile | undefined> {
    const fields = await this.#redis.hgetall(this.#profileKey(profileId));
    return parseProfile(fields);
  }

  /** A profile's allowed origins alone: its sealed state, which may be large, is not read. */
  async allowedOrigins(profileId: string): Promise<string[]> {
    return JSON.parse((await this.#redis.hget(this.#profileKey(profileId), 'origins')) ?? '[]') as string[];
  }

  async listProfiles(): Promise<StoredProfile[]> {
    const ids = (await this.#redis.smembers(this.#profilesKey())).sort();
    const pipeline = this.#redis.pipeline();
    for (const id of ids) pipeline.hgetall(this.#profileKey(id));
    const replies = (await pipeline.exec()) ?? [];
    return replies
      .map(([, fields]) => parseProfile(fields as Record<string, string>))
      .filter((profile): profile is StoredProfile => profile !== undefined);
  }

  async acquire(input: Parameters<LeaseStore['acquire']>[0]): Promise<AcquireOutcome> {
    const { profileId, scope } = input;
    const reply = await this.#redis.acquireLease(
      this.#liveKey(profileId),
      this.#leaseKey(profileId, input.newLeaseId),
      this.#leasePrefix(profileId),
      input.newLeaseId,
      scope.tenant,
      scope.principal,
      input.providerRef,
      scope.run_id,
      scope.attempt,
      input.requestedExpiresAtMs,
      input.nowMs,
      input.caps.stepMs,
      input.caps.lifetimeMs,
    );
    const [status, leaseId, runId, attempt] = reply.map(String);
    switch (status) {
      case 'created':
      case 'reattached':
      case 'expired':
        return { status, leaseId: leaseId as string };
      case 'conflict':
        return { status, leaseId: leaseId as string, runId: runId ?? '', attempt: Number(attempt) };
      default:
        throw new Error(`acquireLease answered ${status}`);
    }
  }

  async getLease(profileId: string, leaseId: string): Promise<LeaseRecord | undefined> {
    return leaseFromFields(profileId, await this.#redis.hgetall(this.#leaseKey(profileId, leaseId)));
  }

  /**
   * Every profile's live lease, in three pipelined round trips whatever their number (the run
   * workers' upkeep reads them once a pass: ADR-0127 d6).
   */
  async listLiveLeases(): Promise<LeaseRecord[]> {
    const profileIds = await this.#redis.smembers(this.#profilesKey());
    if (profileIds.length === 0) return [];
    const live = this.#redis.pipeline();
    for (const id of profileIds) live.get(this.#liveKey(id));
    const leaseIds = ((await live.exec()) ?? []).map(([, value]) => value as string | null);
    const held = profileIds.flatMap((profileId, index) => {
      const leaseId = leaseIds[index];
      return leaseId ? [{ profileId, leaseId }] : [];
    });
    if (held.length === 0) return [];
    const records = this.#redis.pipeline();
    for (const { profileId, leaseId } of held) records.hgetall(this.#leaseKey(profileId, leaseId));
    const replies = (await records.exec()) ?? [];
    return held.flatMap(({ profileId }, index) => {
      const lease = leaseFromFields(profileId, replies[index]?.[1] as Record<string, string>);
      return lease?.state === 'live' ? [lease] : [];
    });
  }

  async liveLeaseId(profileId: string): Promise<string | undefined> {
    return (await this.#redis.get(this.#liveKey(profileId))) ?? undefined;
  }

  async renew(
    profileId: string,
    leaseId: string,
    requestedExpiresAtMs: number,
    nowMs: number,
    caps: LeaseCaps,
  ): Promise<RenewOutcome> {
    const [status, value] = (
      await this.#redis.renewLease(
        this.#leaseKey(profileId, leaseId),
        requestedExpiresAtMs,
        nowMs,
        caps.stepMs,
        caps.lifetimeMs,
      )
    ).map(String);
    if (status === 'renewed') return { status, expiresAtMs: Number(value) };
    if (status === 'lease_expired') return { status };
    return { status: 'not_found' };
  }

  async beginClose(
    profileId: string,
    leaseId: string,
    nowMs: number,
    reason: LeaseCloseReason,
  ): Promise<BeginCloseOutcome> {
    const [status, a, b] = (
      await this.#redis.beginClose(this.#leaseKey(profileId, leaseId), nowMs, reason)
    ).map(String);
    switch (status) {
      case 'closing':
        return { status, sealAllowed: a === '1' };
      case 'in_progress':
        return { status };
      case 'closed':
        return { status, reason: (a ?? 'closed') as LeaseCloseReason, sealed: b === '1' };
      default:
        return { status: 'not_found' };
    }
  }

  async finishClose(
    profileId: string,
    leaseId: string,
    nowMs: number,
    sealedBlob: string | undefined,
  ): Promise<{ sealed: boolean; reason: LeaseCloseReason }> {
    const [sealed, reason] = await this.#redis.finishClose(
      this.#leaseKey(profileId, leaseId),
      this.#liveKey(profileId),
      this.#profileKey(profileId),
      leaseId,
      nowMs,
      sealedBlob ?? '',
      CLOSED_RETENTION_MS,
    );
    return { sealed: Number(sealed) === 1, reason: String(reason) as LeaseCloseReason };
  }

  async advanceSequence(
    profileId: string,
    leaseId: string,
    sequence: number,
    nowMs: number,
    advance: boolean,
  ): Promise<SequenceOutcome> {
    const [status, value] = (
      await this.#redis.advanceSequence(this.#leaseKey(profileId, leaseId), sequence, nowMs, advance ? 1 : 0)
    ).map(String);
    switch (status) {
      case 'ok':
        return { status, sequence: Number(value) };
      case 'sequence_mismatch':
        return { status, current: Number(value) };
      case 'lease_expired':
        return { status };
      default:
        return { status: 'not_found' };
    }
  }

  #idempotencyKey(profileId: string, key: string): string {
    return `${this.#profileTag(profileId)}:idem:${key}`;
  }

  async claimIdempotency(profileId: string, key: string, requestHash: string): Promise<IdempotencyClaim> {
    const [status, httpStatus, body] = (
      await this.#redis.claimIdempotency(
        this.#idempotencyKey(profileId, key),
        requestHash,
        IDEMPOTENCY_TTL_MS,
      )
    ).map(String);
    if (status === 'replay') return { status, httpStatus: Number(httpStatus), body: body ?? '' };
    if (status === 'claimed' || status === 'pending' || status === 'conflict') return { status };
    throw new Error(`claimIdempotency answered ${status}`);
  }

  async completeIdempotency(profileId: string, key: string, httpStatus: number, body: string): Promise<void> {
    await this.#redis.hset(
      this.#idempotencyKey(profileId, key),
      'state',
      'done',
      'status',
      httpStatus,
      'body',
      body,
    );
  }

  async releaseIdempotency(profileId: string, key: string): Promise<void> {
    await this.#redis.del(this.#idempotencyKey(profileId, key));
  }
}

function parseProfile(fields: Record<string, string>): StoredProfile | undefined {
  if (!fields.id) return undefined;
  return {
    id: fields.id,
    tenant: fields.tenant ?? '',
    principal: fields.principal ?? '',
    allowedOrigins: JSON.parse(fields.origins ?? '[]') as string[],
    protected: fields.protected === '1',
    sealedBlob: fields.sealed || undefined,
    sealedAtMs: fields.sealed_at ? Number(fields.sealed_at) : undefined,
    createdAtMs: Number(fields.created_at),
  };
}

/** A lease hash as the store writes it; undefined for a missing one. */
function leaseFromFields(
  profileId: string,
  fields: Record<string, string> | undefined,
): LeaseRecord | undefined {
  if (!fields?.id) return undefined;
  return {
    id: fields.id,
    profileId,
    providerRef: fields.provider_ref ?? '',
    scope: {
      tenant: fields.tenant ?? '',
      principal: fields.principal ?? '',
      run_id: fields.run_id ?? '',
      attempt: Number(fields.attempt),
    },
    state: (fields.state ?? 'closed') as LeaseState,
    acquiredAtMs: Number(fields.acquired_at),
    expiresAtMs: Number(fields.expires_at),
    sequence: Number(fields.seq),
    effects: Number(fields.effects),
    closeReason: fields.close_reason as LeaseCloseReason | undefined,
    sealed: fields.sealed === '1',
  };
}
