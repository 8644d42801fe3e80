import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalArtifactStore, uploadArtifactRef } from '../../libs/artifacts/index.js';
import {
  newId,
  scheduleSpecSchema,
  UPLOAD_UNUSED_TTL_MS,
  type UploadRecord,
} from '../../libs/contracts/index.js';
import { RunKeys, RunStore, ScheduleStore, UPLOAD_HOLD_GRACE_MS } from '../../libs/store/index.js';
import { ArtifactSweep } from '../../libs/sweeper/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, TEST_RUN_LIMITS } from '../fixtures/run-store.js';

const TENANT = 'acme';
const BYTES = new Uint8Array([37, 80, 68, 70, 0, 255]);

/**
 * Uploads (DESIGN §12) on a real Redis and a local artifact folder: a run's input holds the files
 * it lists, so they outlive their 7 days while it is kept; the artifact sweep keeps an upload's
 * folder while its record is, lets go of the runs that are gone, and deletes the bytes of an
 * upload whose record expired — and still deletes the folders of runs that are gone.
 */
describe('uploaded files, the runs that hold them and the artifact sweep', () => {
  const base = uniquePrefix('uploads');
  const keys = new RunKeys(`${base}:`);
  let nowMs = Date.now();
  let redis: Redis;
  let store: RunStore;
  let artifactsDir: string;
  let artifacts: LocalArtifactStore;
  let sessionId: string;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-uploads');
    store = new RunStore(redis, `${base}:`, { clock: () => nowMs });
    artifactsDir = await mkdtemp(join(tmpdir(), 'lh-uploads-'));
    artifacts = await new LocalArtifactStore(artifactsDir).open();
    sessionId = await createTestSession(store, TENANT, { instructions: 'attach' });
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, base);
    await closeRedis(redis);
    await rm(artifactsDir, { recursive: true, force: true });
  });

  /** An upload of `tenant` made `ageMs` ago, its bytes in the artifact store. */
  async function uploaded(tenant = TENANT, ageMs = 0): Promise<string> {
    const record: UploadRecord = {
      id: newId('fil'),
      tenant,
      principal: 'alice',
      name: 'receipt.pdf',
      content_type: 'application/pdf',
      size_bytes: BYTES.byteLength,
      sha256: 'a'.repeat(64),
      created_at_ms: nowMs - ageMs,
    };
    await store.uploads.create(record);
    await artifacts.put(uploadArtifactRef(tenant, record.id), BYTES, record.content_type);
    return record.id;
  }

  /** Time passed for a held upload: its record says it was made `ageMs` ago. */
  const madeAgo = (fileId: string, ageMs: number) =>
    redis.hset(keys.upload(fileId), 'created_at_ms', String(nowMs - ageMs));

  const bytesKept = async (fileId: string, tenant = TENANT) =>
    (await artifacts.get(uploadArtifactRef(tenant, fileId))) !== undefined;

  function submit(files: string[]) {
    return store.submitRun({
      tenant: TENANT,
      principal: 'alice',
      sessionId,
      input: { text: 'attach', files },
      files,
      limits: TEST_RUN_LIMITS,
      timeoutMs: 3_600_000,
    });
  }

  it('reads an upload to its own tenant only, expiring 7 days after it was made', async () => {
    const fileId = await uploaded();
    const view = await store.uploads.get(TENANT, fileId);
    expect(view).toEqual(
      expect.objectContaining({ id: fileId, name: 'receipt.pdf', expires_at_ms: expect.any(Number) }),
    );
    const ttlMs = await redis.pttl(keys.upload(fileId));
    expect(ttlMs).toBeGreaterThan(UPLOAD_UNUSED_TTL_MS - 60_000);
    expect(ttlMs).toBeLessThanOrEqual(UPLOAD_UNUSED_TTL_MS);
    expect(await store.uploads.get('other', fileId)).toBeUndefined();
  });

  it('holds the files a submitted run lists, and refuses one of another tenant without writing the run', async () => {
    const ours = await uploaded();
    const { run } = await submit([ours]);
    expect(await redis.pttl(keys.upload(ours))).toBe(-1);
    expect((await store.uploads.get(TENANT, ours))?.expires_at_ms).toBeNull();
    expect(await store.uploads.runUpload(run.id, TENANT, ours)).toEqual(
      expect.objectContaining({ id: ours }),
    );
    // A file the run does not list is not the run's, whoever's it is.
    expect(await store.uploads.runUpload(run.id, TENANT, await uploaded())).toBeUndefined();

    const theirs = await uploaded('other');
    const before = (await store.listRuns(TENANT, sessionId)).length;
    await expect(submit([theirs])).rejects.toMatchObject({ code: 'not_found' });
    await expect(submit(['fil_00000000000000000000'])).rejects.toMatchObject({ code: 'not_found' });
    expect((await store.listRuns(TENANT, sessionId)).length).toBe(before);
    // Another tenant's file stays as it was: unheld, expiring.
    expect(await redis.pttl(keys.upload(theirs))).toBeGreaterThan(0);
  });

  it('keeps uploads through the sweep that deletes gone runs’ folders, and lets go of gone holders', async () => {
    const goneRun = newId('run');
    await artifacts.put({ tenant: TENANT, runId: goneRun, name: 'shot.jpg' }, BYTES, 'image/jpeg');
    const unused = await uploaded();
    const heldByLive = await uploaded();
    await submit([heldByLive]);
    // Held by a run that was never written (or expired), made 8 days ago: past its 7 days.
    const stale = await uploaded();
    await store.uploads.hold(TENANT, goneRun, [stale]);
    await madeAgo(stale, 8 * 86_400_000);
    // Held the same way, made a day ago: it goes back to expiring 7 days after it was made.
    const recent = await uploaded(TENANT, 86_400_000);
    await store.uploads.hold(TENANT, goneRun, [recent]);
    // Expired record, bytes left behind.
    const expired = await uploaded();
    await redis.del(keys.upload(expired));
    // A hold a moment old is kept even though its run is not found: the run is written after it.
    const justHeld = await uploaded();
    nowMs += UPLOAD_HOLD_GRACE_MS + 1_000;
    await store.uploads.hold(TENANT, newId('run'), [justHeld]);
    await madeAgo(justHeld, 8 * 86_400_000);

    const deleted = new Set(await new ArtifactSweep({ artifacts, store }).sweep());
    expect(deleted.has(goneRun)).toBe(true);
    expect(deleted.has(stale)).toBe(true);
    expect(deleted.has(expired)).toBe(true);
    for (const kept of [unused, heldByLive, recent, justHeld]) {
      expect(deleted.has(kept)).toBe(false);
      expect(await bytesKept(kept)).toBe(true);
    }
    expect(await bytesKept(stale)).toBe(false);
    expect(await bytesKept(expired)).toBe(false);
    expect(await redis.exists(keys.upload(stale), keys.uploadHolders(stale))).toBe(0);
    expect((await store.uploads.get(TENANT, recent))?.expires_at_ms).toBe(
      nowMs - UPLOAD_HOLD_GRACE_MS - 1_000 - 86_400_000 + UPLOAD_UNUSED_TTL_MS,
    );
    expect((await store.uploads.get(TENANT, heldByLive))?.expires_at_ms).toBeNull();
    expect((await store.uploads.get(TENANT, justHeld))?.expires_at_ms).toBeNull();
  });

  it('keeps an upload a schedule lists while the schedule lives, and lets it go once it is deleted', async () => {
    const schedules = new ScheduleStore(redis, `${base}:`, () => nowMs);
    const spec = scheduleSpecSchema.parse({
      every_ms: 60_000,
      run: { session_id: sessionId, input: 'attach' },
    });
    const schedule = await schedules.create({ tenant: TENANT, principal: 'alice', keyId: 'key_1' }, spec);
    const listed = await uploaded();
    await store.uploads.hold(TENANT, schedule.id, [listed]);
    await madeAgo(listed, 8 * 86_400_000);
    nowMs += UPLOAD_HOLD_GRACE_MS + 1_000;

    // A schedule is no run: the sweep asks the schedules whether it still exists.
    const sweep = () => new ArtifactSweep({ artifacts, store, schedules }).sweep();
    expect(await sweep()).not.toContain(listed);
    expect(await bytesKept(listed)).toBe(true);
    expect((await store.uploads.get(TENANT, listed))?.expires_at_ms).toBeNull();

    await schedules.delete(TENANT, schedule.id);
    expect(await sweep()).toContain(listed);
    expect(await bytesKept(listed)).toBe(false);
  });
});
