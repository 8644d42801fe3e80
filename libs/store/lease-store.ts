import {
  type CreateProfile,
  type LeaseCloseReason,
  type LeaseState,
  type ProfileRef,
  type SealFault,
  sealFaultSchema,
  type UploadRecord,
} from '../contracts/index.js';
import type {
  AcquireOutcome,
  BeginCloseOutcome,
  EffectState,
  IdempotencyClaim,
  IdempotentAnswerRecord,
  IdempotentRenewal,
  IdempotentRenewOutcome,
  LeaseCaps,
  LeaseRecord,
  LeaseStore,
  ProfileSettings,
  SealedState,
  SequenceOutcome,
  StoredProfile,
} from '../lease/ports.js';
import type { RedisClient } from './redis-client.js';
import { readSealedRunSecrets } from './run-secrets.js';
import { withScripts } from './scripts.js';
import { slotBatch } from './slot-batch.js';
import { UploadStore } from './uploads.js';

/** What a profile's change may set: the settings given, the others kept. */
export type ProfileChange = Partial<
  Pick<CreateProfile, 'allowed_origins' | 'frame_origins' | 'subresources' | 'protected'>
>;

export type DeleteProfileOutcome = { status: 'deleted' | 'not_found' } | { status: 'held'; runId: string };

/** How long a closed lease's record is kept, so late calls read `lease_expired`. */
const CLOSED_RETENTION_MS = 24 * 3600_000;
/** How long an idempotency record answers replays. */
const IDEMPOTENCY_TTL_MS = 24 * 3600_000;

/**
 * Profiles, leases and idempotency records in Redis. Profile ids are unique within their tenant
 * (DESIGN §3), so every key of a profile carries both: they share the hash tag `{prf:TENANT/ID}`,
 * and every lease script touches one Redis Cluster slot. Each tenant has its own index of profile
 * ids, so listing one tenant's profiles reads nothing of another's.
 */
export class RedisLeaseStore implements LeaseStore {
  readonly #redis: ReturnType<typeof withScripts>;
  readonly #uploads: UploadStore;

  constructor(
    redis: RedisClient,
    private readonly prefix: string,
  ) {
    this.#redis = withScripts(redis);
    this.#uploads = new UploadStore(redis, prefix);
  }

  /** DESIGN §12: a run's declared secrets as sealed at submission (the run's own key), or undefined. */
  sealedRunSecrets(runId: string): Promise<string | undefined> {
    return readSealedRunSecrets(this.#redis, this.prefix, runId);
  }

  /** DESIGN §12: an upload the run's input lists, of the run's tenant (see {@link UploadStore.runUpload}). */
  runUpload(runId: string, tenant: string, fileId: string): Promise<UploadRecord | undefined> {
    return this.#uploads.runUpload(runId, tenant, fileId);
  }

  #profileTag(profile: ProfileRef): string {
    return `${this.prefix}{prf:${profile.tenant}/${profile.id}}`;
  }
  #profileKey(profile: ProfileRef): string {
    return `${this.#profileTag(profile)}:profile`;
  }
  #liveKey(profile: ProfileRef): string {
    return `${this.#profileTag(profile)}:live`;
  }
  #leasePrefix(profile: ProfileRef): string {
    return `${this.#profileTag(profile)}:lease:`;
  }
  #leaseKey(profile: ProfileRef, leaseId: string): string {
    return `${this.#leasePrefix(profile)}${leaseId}`;
  }
  #tenantProfilesKey(tenant: string): string {
    return `${this.prefix}tenant:${tenant}:profiles`;
  }
  /** Every profile's `tenant/id`: what the upkeep and the start-up revocation walk. */
  #profilesKey(): string {
    return `${this.prefix}profiles`;
  }

  /**
   * One slot per script: the two indexes live in other slots than the profile, so they
   * are written first (intent), in one pipeline, and the script writes the record alone. A crash
   * in between leaves index entries without a record, which every reader skips; a create that
   * finds the profile already there added nothing new (its entries were the first create's).
   * Entries are never pruned on read: a reader cannot tell a crashed create from one whose script
   * has not run yet, and pruning that one would leave a profile no index names.
   */
  async createProfile(profile: CreateProfile, nowMs: number): Promise<boolean> {
    failOnError(
      await slotBatch(this.#redis)
        .sadd(this.#tenantProfilesKey(profile.tenant), profile.id)
        .sadd(this.#profilesKey(), profileLabel(profile))
        .exec(),
    );
    const created = await this.#redis.createProfile(
      this.#profileKey(profile),
      profile.id,
      profile.tenant,
      profile.principal,
      JSON.stringify(profile.allowed_origins),
      profile.protected ? 1 : 0,
      nowMs,
      JSON.stringify(profile.frame_origins),
      profile.subresources,
    );
    return created === 1;
  }

  /**
   * Changes the settings given; answers the profile as it is now, or undefined when the tenant has
   * no such profile. Leases acquired after read the new settings; a live one keeps its own.
   */
  async updateProfile(
    profile: ProfileRef,
    change: ProfileChange,
    nowMs: number,
  ): Promise<ProfileSettings | undefined> {
    const fields: Array<string | number> = [];
    if (change.allowed_origins) fields.push('origins', JSON.stringify(change.allowed_origins));
    if (change.frame_origins) fields.push('frame_origins', JSON.stringify(change.frame_origins));
    if (change.subresources) fields.push('subresources', change.subresources);
    if (change.protected !== undefined) fields.push('protected', change.protected ? 1 : 0);
    const changed = await this.#redis.updateProfile(
      this.#profileKey(profile),
      profile.tenant,
      nowMs,
      ...fields,
    );
    return changed === 1 ? this.profileSettings(profile) : undefined;
  }

  /**
   * Deletes the profile with its sealed state, unless a run holds its lease or is in its line
   * (that run is named). The indexes are cleaned after the record is gone: a reader skips an entry
   * without a record, so a crash in between leaves nothing a reader sees.
   */
  async deleteProfile(profile: ProfileRef): Promise<DeleteProfileOutcome> {
    const [status, runId] = await this.#redis.deleteProfile(
      this.#profileKey(profile),
      this.#liveKey(profile),
      `${this.#profileTag(profile)}:turns`,
      this.#leasePrefix(profile),
      profile.tenant,
    );
    if (status === 'held') return { status, runId: String(runId ?? '') };
    if (status === 'not_found') return { status };
    if (status !== 'deleted') throw new Error(`deleteProfile answered ${String(status)}`);
    failOnError(
      await slotBatch(this.#redis)
        .srem(this.#tenantProfilesKey(profile.tenant), profile.id)
        .srem(this.#profilesKey(), profileLabel(profile))
        .exec(),
    );
    return { status };
  }

  async getProfile(profile: ProfileRef): Promise<StoredProfile | undefined> {
    const fields = await this.#redis.hgetall(this.#profileKey(profile));
    const settings = parseProfile(fields);
    return settings && { ...settings, sealedBlob: fields.sealed || undefined };
  }

  /** A profile's settings alone: its sealed state, which may be large, is not read. */
  async profileSettings(profile: ProfileRef): Promise<ProfileSettings | undefined> {
    const values = await this.#redis.hmget(this.#profileKey(profile), ...SETTINGS_FIELDS);
    return parseProfile(fieldsOf(values));
  }

  /** A profile's allowed origins alone: its sealed state, which may be large, is not read. */
  async allowedOrigins(profile: ProfileRef): Promise<string[]> {
    return JSON.parse((await this.#redis.hget(this.#profileKey(profile), 'origins')) ?? '[]') as string[];
  }

  /**
   * One tenant's profiles in id order: its own index, then each profile's settings (never the
   * sealed state), in two round trips whatever the number of profiles other tenants have.
   */
  async listProfiles(tenant: string): Promise<ProfileSettings[]> {
    const ids = (await this.#redis.smembers(this.#tenantProfilesKey(tenant))).sort();
    if (ids.length === 0) return [];
    const pipeline = slotBatch(this.#redis);
    for (const id of ids) pipeline.hmget(this.#profileKey({ tenant, id }), ...SETTINGS_FIELDS);
    const replies = (await pipeline.exec()) ?? [];
    return replies
      .map(([, values]) => parseProfile(fieldsOf(values as Array<string | null>)))
      .filter((profile): profile is ProfileSettings => profile !== undefined);
  }

  /** Every profile whose record exists, in `tenant/id` order (two round trips). */
  async listAllProfileRefs(): Promise<ProfileRef[]> {
    const indexed = await this.#indexedProfileRefs();
    if (indexed.length === 0) return [];
    const exists = slotBatch(this.#redis);
    for (const profile of indexed) exists.exists(this.#profileKey(profile));
    const replies = (await exists.exec()) ?? [];
    return indexed.filter((_, index) => replies[index]?.[1] === 1);
  }

  /** The index as written: it may name a profile whose create crashed before its record. */
  async #indexedProfileRefs(): Promise<ProfileRef[]> {
    return (await this.#redis.smembers(this.#profilesKey())).sort().flatMap((label) => {
      const profile = refFromLabel(label);
      return profile ? [profile] : [];
    });
  }

  async acquire(input: Parameters<LeaseStore['acquire']>[0]): Promise<AcquireOutcome> {
    const { profile, scope } = input;
    const reply = await this.#redis.acquireLease(
      this.#liveKey(profile),
      this.#leaseKey(profile, input.newLeaseId),
      this.#leasePrefix(profile),
      this.#profileKey(profile),
      this.#idempotencyKey(profile, input.idempotency?.key ?? ''),
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
      input.served === false ? 0 : 1,
      input.idempotency?.requestHash ?? '',
      IDEMPOTENCY_TTL_MS,
      ...PROFILE_FIELDS,
    );
    const [status, leaseId, third, fourth] = reply;
    switch (status) {
      case 'idem_replay':
        return {
          status: 'idempotency',
          claim: { status: 'replay', httpStatus: Number(leaseId), body: String(third ?? '') },
        };
      case 'idem_pending':
        return { status: 'idempotency', claim: { status: 'pending' } };
      case 'idem_conflict':
        return { status: 'idempotency', claim: { status: 'conflict' } };
      case 'not_found':
      case 'not_served':
      case 'protected':
        return { status };
      case 'created':
      case 'reattached': {
        const lease = leaseFromFields(profile, pairsOf(third));
        if (!lease) throw new Error(`acquireLease answered ${status} without the lease`);
        if (status === 'reattached') return { status, leaseId: String(leaseId), lease };
        const settings = parseProfile(fieldsOf(fourth as Array<string | null>, PROFILE_FIELDS));
        if (!settings) throw new Error('acquireLease answered created without the profile');
        return { status, leaseId: String(leaseId), lease, profile: settings };
      }
      case 'expired':
        return { status, leaseId: String(leaseId) };
      case 'conflict':
        return {
          status,
          leaseId: String(leaseId),
          runId: third === null || third === undefined ? '' : String(third),
          attempt: Number(fourth),
        };
      default:
        throw new Error(`acquireLease answered ${String(status)}`);
    }
  }

  async noteSealFault(profile: ProfileRef, fault: SealFault | undefined): Promise<void> {
    await this.#redis.noteSealFault(this.#profileKey(profile), fault ? JSON.stringify(fault) : '');
  }

  /** The sealed state and its version in one read, so a context warmed from it is named right. */
  async sealedState(profile: ProfileRef): Promise<SealedState | undefined> {
    const values = await this.#redis.hmget(this.#profileKey(profile), 'sealed', ...SEAL_VERSION_FIELDS);
    const fields = fieldsOf(values.slice(1), SEAL_VERSION_FIELDS);
    if (!fields.created_at) return undefined;
    return { blob: values[0] || undefined, sealVersion: sealVersionOf(fields) };
  }

  async getLease(profile: ProfileRef, leaseId: string): Promise<LeaseRecord | undefined> {
    return leaseFromFields(profile, await this.#redis.hgetall(this.#leaseKey(profile, leaseId)));
  }

  /**
   * Every profile's live lease, in three pipelined round trips whatever their number (the run
   * workers' upkeep reads them once a pass: ADR-0127 d6). An index entry without a record has no
   * live pointer either (the record is written before any lease), so the index is read as it is.
   */
  async listLiveLeases(): Promise<LeaseRecord[]> {
    const profiles = await this.#indexedProfileRefs();
    if (profiles.length === 0) return [];
    const live = slotBatch(this.#redis);
    for (const profile of profiles) live.get(this.#liveKey(profile));
    const leaseIds = ((await live.exec()) ?? []).map(([, value]) => value as string | null);
    const held = profiles.flatMap((profile, index) => {
      const leaseId = leaseIds[index];
      return leaseId ? [{ profile, leaseId }] : [];
    });
    return (await this.readLeases(held)).filter((lease): lease is LeaseRecord => lease?.state === 'live');
  }

  /** The records of the leases named, in one pipelined round trip; undefined where none is kept. */
  async readLeases(
    refs: ReadonlyArray<{ profile: ProfileRef; leaseId: string }>,
  ): Promise<Array<LeaseRecord | undefined>> {
    if (refs.length === 0) return [];
    const records = slotBatch(this.#redis);
    for (const { profile, leaseId } of refs) records.hgetall(this.#leaseKey(profile, leaseId));
    const replies = (await records.exec()) ?? [];
    return refs.map(({ profile }, index) =>
      leaseFromFields(profile, replies[index]?.[1] as Record<string, string> | undefined),
    );
  }

  async liveLeaseId(profile: ProfileRef): Promise<string | undefined> {
    return (await this.#redis.get(this.#liveKey(profile))) ?? undefined;
  }

  /**
   * One `renewIdempotently` script per renewal (its idempotency record and lease share the
   * profile's slot), all in one pipeline: one round trip for the batch on one Redis, one per node on
   * a cluster (`slotBatch`). A renewed lease comes back with its record, so no second read is needed.
   */
  async renewIdempotently(
    renewals: readonly IdempotentRenewal[],
    nowMs: number,
    caps: LeaseCaps,
  ): Promise<IdempotentRenewOutcome[]> {
    if (renewals.length === 0) return [];
    const batch = slotBatch(this.#redis) as ReturnType<typeof slotBatch> & {
      renewIdempotently(...args: Array<string | number>): unknown;
    };
    for (const renewal of renewals)
      batch.renewIdempotently(
        this.#idempotencyKey(renewal.profile, renewal.idempotencyKey),
        this.#leaseKey(renewal.profile, renewal.leaseId),
        renewal.requestHash,
        IDEMPOTENCY_TTL_MS,
        renewal.requestedExpiresAtMs,
        nowMs,
        caps.stepMs,
        caps.lifetimeMs,
      );
    const replies = (await batch.exec()) ?? [];
    const failed = renewals.find((_, index) => replies[index]?.[0] !== null);
    if (failed) {
      // As the single route does on an unexpected failure: the claims this batch made are released,
      // so a retry really retries instead of waiting on records no one will complete.
      const claimed = renewals.filter((_, index) => {
        const [error, reply] = replies[index] ?? [null, null];
        return !error && ['renewed', 'lease_expired', 'not_found'].includes(String((reply as unknown[])[0]));
      });
      if (claimed.length > 0) {
        const release = slotBatch(this.#redis);
        for (const renewal of claimed)
          release.del(this.#idempotencyKey(renewal.profile, renewal.idempotencyKey));
        await release.exec();
      }
      throw replies[renewals.indexOf(failed)]?.[0] ?? new Error('renewIdempotently answered no reply');
    }
    return renewals.map((renewal, index) =>
      renewOutcome(renewal.profile, ((replies[index]?.[1] ?? []) as Array<string | number>).map(String)),
    );
  }

  async beginClose(
    profile: ProfileRef,
    leaseId: string,
    nowMs: number,
    reason: LeaseCloseReason,
  ): Promise<BeginCloseOutcome> {
    const [status, a, b] = (
      await this.#redis.beginClose(this.#leaseKey(profile, leaseId), nowMs, reason)
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
    profile: ProfileRef,
    leaseId: string,
    nowMs: number,
    sealedBlob: string | undefined,
  ): Promise<{ sealed: boolean; reason: LeaseCloseReason }> {
    const [sealed, reason] = await this.#redis.finishClose(
      this.#leaseKey(profile, leaseId),
      this.#liveKey(profile),
      this.#profileKey(profile),
      leaseId,
      nowMs,
      sealedBlob ?? '',
      CLOSED_RETENTION_MS,
    );
    return { sealed: Number(sealed) === 1, reason: String(reason) as LeaseCloseReason };
  }

  async advanceSequence(
    profile: ProfileRef,
    leaseId: string,
    sequence: number,
    nowMs: number,
    advance: boolean | 'skip',
    dispatchId = '',
  ): Promise<SequenceOutcome> {
    const mode = advance === 'skip' ? 'skip' : advance ? 1 : 0;
    const [status, value] = (
      await this.#redis.advanceSequence(this.#leaseKey(profile, leaseId), sequence, nowMs, mode, dispatchId)
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

  async noteEffect(
    profile: ProfileRef,
    leaseId: string,
    sequence: number,
    state: 'applied' | 'refused' | 'unknown',
    code?: string,
  ): Promise<void> {
    await this.#redis.noteEffect(this.#leaseKey(profile, leaseId), sequence, state, code ?? '');
  }

  #idempotencyKey(profile: ProfileRef, key: string): string {
    return `${this.#profileTag(profile)}:idem:${key}`;
  }

  async claimIdempotency(profile: ProfileRef, key: string, requestHash: string): Promise<IdempotencyClaim> {
    const [status, httpStatus, body] = (
      await this.#redis.claimIdempotency(this.#idempotencyKey(profile, key), requestHash, IDEMPOTENCY_TTL_MS)
    ).map(String);
    if (status === 'replay') return { status, httpStatus: Number(httpStatus), body: body ?? '' };
    if (status === 'claimed' || status === 'pending' || status === 'conflict') return { status };
    throw new Error(`claimIdempotency answered ${status}`);
  }

  async completeIdempotency(
    profile: ProfileRef,
    key: string,
    httpStatus: number,
    body: string,
  ): Promise<void> {
    await this.#redis.hset(
      this.#idempotencyKey(profile, key),
      'state',
      'done',
      'status',
      httpStatus,
      'body',
      body,
    );
  }

  async completeIdempotencies(answers: readonly IdempotentAnswerRecord[]): Promise<void> {
    if (answers.length === 0) return;
    const batch = slotBatch(this.#redis);
    for (const answer of answers)
      batch.hset(
        this.#idempotencyKey(answer.profile, answer.key),
        'state',
        'done',
        'status',
        answer.httpStatus,
        'body',
        answer.body,
      );
    failOnError(await batch.exec());
  }

  async releaseIdempotency(profile: ProfileRef, key: string): Promise<void> {
    await this.#redis.del(this.#idempotencyKey(profile, key));
  }
}

/** The profile fields listing reads: everything but the sealed state. */
const SETTINGS_FIELDS = [
  'id',
  'tenant',
  'principal',
  'origins',
  'frame_origins',
  'subresources',
  'protected',
  'sealed_at',
  'created_at',
  'seal_gen',
  'seal_fault',
  'settings_gen',
] as const;

/** What a created lease answers of its profile: its settings, never the sealed state. */
const PROFILE_FIELDS = SETTINGS_FIELDS;

/** The fields a seal version is made of (see `sealVersionOf`). */
const SEAL_VERSION_FIELDS = ['created_at', 'seal_gen', 'sealed_at', 'settings_gen'] as const;

/**
 * The version of a profile's sealed state. `seal_gen` counts seals (finishClose); the
 * seal time and the profile's creation time are part of it too, so a seal written without the count
 * (an older worker during a rolling update) or a profile made again under the same id still differ.
 * A change of the profile's settings (`settings_gen`) makes a new version too: a context is warmed
 * with its profile's origins, so one warmed before a change must not serve a lease after it.
 */
function sealVersionOf(fields: Record<string, string>): string {
  const settings = fields.settings_gen ? `.s${fields.settings_gen}` : '';
  return `${fields.created_at ?? ''}.${fields.seal_gen ?? '0'}.${fields.sealed_at ?? ''}${settings}`;
}

function fieldsOf(
  values: ReadonlyArray<string | null>,
  names: readonly string[] = SETTINGS_FIELDS,
): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const [index, name] of names.entries()) {
    const value = values[index];
    if (value !== null && value !== undefined) fields[name] = value;
  }
  return fields;
}

function parseProfile(fields: Record<string, string>): ProfileSettings | undefined {
  if (!fields.id) return undefined;
  return {
    id: fields.id,
    tenant: fields.tenant ?? '',
    principal: fields.principal ?? '',
    allowedOrigins: JSON.parse(fields.origins ?? '[]') as string[],
    frameOrigins: JSON.parse(fields.frame_origins ?? '[]') as string[],
    subresources: fields.subresources === 'allowed_origins' ? 'allowed_origins' : 'any',
    protected: fields.protected === '1',
    sealedAtMs: fields.sealed_at ? Number(fields.sealed_at) : undefined,
    createdAtMs: Number(fields.created_at),
    sealVersion: sealVersionOf(fields),
    sealFault: parseSealFault(fields.seal_fault),
  };
}

/** A profile's seal fault note; one this version cannot read is shown as none rather than failing the read. */
function parseSealFault(stored: string | undefined): SealFault | undefined {
  if (!stored) return undefined;
  try {
    const parsed = sealFaultSchema.safeParse(JSON.parse(stored));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** A flat HGETALL reply (`[field, value, …]`) as a record. */
function pairsOf(reply: unknown): Record<string, string> {
  const fields: Record<string, string> = {};
  if (!Array.isArray(reply)) return fields;
  for (let index = 0; index + 1 < reply.length; index += 2)
    fields[String(reply[index])] = String(reply[index + 1]);
  return fields;
}

/** A profile's `tenant/id` label in the index of every profile (and in the upkeep's). */
export function profileLabel(profile: ProfileRef): string {
  return `${profile.tenant}/${profile.id}`;
}

function failOnError(replies: Array<[Error | null, unknown]> | null): void {
  const failed = replies?.find(([error]) => error !== null);
  if (failed?.[0]) throw failed[0];
}

/** The profile a `tenant/id` label of the profiles index names. */
export function refFromLabel(label: string): ProfileRef | undefined {
  const slash = label.indexOf('/');
  if (slash <= 0 || slash === label.length - 1) return undefined;
  return { tenant: label.slice(0, slash), id: label.slice(slash + 1) };
}

/** What `renewIdempotently-2.lua` answered for one renewal. */
function renewOutcome(profile: ProfileRef, reply: string[]): IdempotentRenewOutcome {
  const [status, a, b] = reply;
  switch (status) {
    case 'replay':
      return { status, httpStatus: Number(a), body: b ?? '' };
    case 'pending':
    case 'conflict':
    case 'lease_expired':
    case 'not_found':
      return { status };
    case 'renewed': {
      const fields: Record<string, string> = {};
      for (let index = 2; index + 1 < reply.length; index += 2)
        fields[reply[index] as string] = reply[index + 1] as string;
      const lease = leaseFromFields(profile, fields);
      if (!lease) throw new Error('renewIdempotently answered renewed without the lease record');
      return { status, lease };
    }
    default:
      throw new Error(`renewIdempotently answered ${status}`);
  }
}

/** A lease hash as the store writes it; undefined for a missing one. */
function leaseFromFields(
  profile: ProfileRef,
  fields: Record<string, string> | undefined,
): LeaseRecord | undefined {
  if (!fields?.id) return undefined;
  return {
    id: fields.id,
    profile: { tenant: profile.tenant, id: profile.id },
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
    lastEffect: fields.effect
      ? { state: fields.effect as EffectState, code: fields.effect_code || undefined }
      : undefined,
    closeReason: fields.close_reason as LeaseCloseReason | undefined,
    sealed: fields.sealed === '1',
  };
}
