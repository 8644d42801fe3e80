import {
  ApiError,
  inputFileIds,
  UPLOAD_UNUSED_TTL_MS,
  type UploadedFile,
  type UploadRecord,
  uploadRecordSchema,
} from '../contracts/index.js';
import type { RedisClient } from './redis-client.js';
import { RunKeys } from './run-keys.js';
import { type ScriptCommands, withScripts } from './scripts.js';
import { slotBatch } from './slot-batch.js';

/**
 * A holder listed this recently is kept by the sweep even when its run is not found: the run is
 * written right after its files are held, and a sweep in between must not let the file go.
 */
export const UPLOAD_HOLD_GRACE_MS = 60_000;

/**
 * Uploaded files (DESIGN §12): each one's record under its own key (`{fil:ID}:file`), expiring 7
 * days after it was made, and the runs that hold it (`{fil:ID}:runs`). A run whose input lists
 * the file holds it (`holdUpload-2.lua`): it then expires with the last of those runs, which the
 * artifact sweep finds gone (`releaseUpload-2.lua`). The bytes are in the artifact store.
 */
export class UploadStore {
  readonly #redis: RedisClient & ScriptCommands;
  readonly #keys: RunKeys;
  readonly #now: () => number;

  /** `keys`: the deployment's (a key prefix, as the run store's own). */
  constructor(redis: RedisClient, keys: RunKeys | string, now: () => number = Date.now) {
    this.#redis = withScripts(redis);
    this.#keys = typeof keys === 'string' ? new RunKeys(keys) : keys;
    this.#now = now;
  }

  /** Writes a new upload's record, unheld: it expires {@link UPLOAD_UNUSED_TTL_MS} after it was made. */
  async create(record: UploadRecord): Promise<UploadedFile> {
    const key = this.#keys.upload(record.id);
    const expiresAtMs = record.created_at_ms + UPLOAD_UNUSED_TTL_MS;
    const fields = Object.fromEntries(Object.entries(record).map(([name, value]) => [name, String(value)]));
    const replies = await this.#redis.multi().hset(key, fields).pexpireat(key, expiresAtMs).exec();
    const failed = replies?.find(([error]) => error);
    if (!replies || failed?.[0]) throw failed?.[0] ?? new Error('the upload record was not written');
    return { ...viewOf(record), expires_at_ms: expiresAtMs };
  }

  /** The tenant's upload as `GET /v1/files/{id}` shows it; another tenant's is undefined. */
  async get(tenant: string, fileId: string): Promise<UploadedFile | undefined> {
    const key = this.#keys.upload(fileId);
    const batch = slotBatch(this.#redis).hgetall(key).call('PEXPIRETIME', key);
    const [[, fields], [, expiresAtMs]] = ((await batch.exec()) ?? [
      [null, {}],
      [null, -2],
    ]) as [[unknown, Record<string, string>], [unknown, number]];
    const record = parseRecord(fields);
    if (!record || record.tenant !== tenant) return undefined;
    // -1: no expiry, a run holds it.
    return { ...viewOf(record), expires_at_ms: expiresAtMs >= 0 ? expiresAtMs : null };
  }

  /** The upload's record whatever its tenant (the caller checks it), or undefined. */
  async record(fileId: string): Promise<UploadRecord | undefined> {
    return parseRecord(await this.#redis.hgetall(this.#keys.upload(fileId)));
  }

  /**
   * The run `runId` of `tenant` lists `fileIds`: each is held for it (see the class). Throws
   * `not_found` naming the first that is unknown, expired or another tenant's; the ones held
   * before it stay held by a run that is never written, which the sweep lets go.
   */
  async hold(tenant: string, runId: string, fileIds: readonly string[]): Promise<void> {
    const now = this.#now();
    for (const fileId of new Set(fileIds)) {
      const held = await this.#redis.holdUpload(
        this.#keys.upload(fileId),
        this.#keys.uploadHolders(fileId),
        tenant,
        runId,
        now,
      );
      if (held !== 'ok') throw new ApiError('not_found', `file ${fileId} not found`);
    }
  }

  /**
   * For the artifact sweep: each upload's holders, or undefined when its record is gone (its bytes
   * may go too). One pipelined round trip.
   */
  async holders(fileIds: readonly string[]): Promise<Map<string, string[] | undefined>> {
    const batch = slotBatch(this.#redis);
    for (const fileId of fileIds) {
      batch.exists(this.#keys.upload(fileId));
      batch.zrange(this.#keys.uploadHolders(fileId), 0, -1);
    }
    const replies = (await batch.exec()) ?? [];
    const found = new Map<string, string[] | undefined>();
    fileIds.forEach((fileId, index) => {
      const [existsError, exists] = replies[index * 2] ?? [null, 0];
      const [holdersError, holders] = replies[index * 2 + 1] ?? [null, []];
      if (existsError || holdersError) throw existsError ?? holdersError;
      found.set(fileId, exists === 1 ? (holders as string[]) : undefined);
    });
    return found;
  }

  /**
   * Lets go of the holders of `fileId` whose runs are gone (listed before the grace); answers the
   * holders left, or -1 when the upload is gone (it had none left and was past its 7 days).
   */
  release(fileId: string, goneRunIds: readonly string[]): Promise<number> {
    const now = this.#now();
    return this.#redis.releaseUpload(
      this.#keys.upload(fileId),
      this.#keys.uploadHolders(fileId),
      now,
      now - UPLOAD_HOLD_GRACE_MS,
      UPLOAD_UNUSED_TTL_MS,
      ...goneRunIds,
    );
  }

  /**
   * The upload `fileId` if the run's input lists it and it is the run's tenant's (the browser
   * worker's check before it sets a file input's files): undefined otherwise.
   */
  async runUpload(runId: string, tenant: string, fileId: string): Promise<UploadRecord | undefined> {
    const input = await this.#redis.hget(this.#keys.run(runId), 'input');
    if (input === null) return undefined;
    let listed: string[];
    try {
      listed = inputFileIds(JSON.parse(input));
    } catch {
      return undefined;
    }
    if (!listed.includes(fileId)) return undefined;
    const record = await this.record(fileId);
    return record?.tenant === tenant ? record : undefined;
  }
}

function parseRecord(fields: Record<string, string> | null | undefined): UploadRecord | undefined {
  if (!fields || Object.keys(fields).length === 0) return undefined;
  const parsed = uploadRecordSchema.safeParse({
    ...fields,
    size_bytes: Number(fields.size_bytes),
    created_at_ms: Number(fields.created_at_ms),
  });
  return parsed.success ? parsed.data : undefined;
}

function viewOf(record: UploadRecord): Omit<UploadedFile, 'expires_at_ms'> {
  const { tenant: _tenant, principal: _principal, ...view } = record;
  return view;
}
