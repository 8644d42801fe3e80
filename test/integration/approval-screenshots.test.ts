import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApprovalCard, newScreenshotName, type RunView } from '../../libs/contracts/index.js';
import { RunScreenshotNotes, RunStore } from '../../libs/store/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran, submitStoreRun } from '../fixtures/run-store.js';

const TENANT = 'acme';

/**
 * An approval card's outlined preview is taken beside the approval's write: every read of the
 * approval says where that picture is (pending, stored, failed), not only the run's own view, so a
 * page listing the tenant's approvals never shows a picture that does not exist yet as if it did.
 */
describe('the screenshot of an approval card, in every read of the approval', () => {
  const prefix = `${uniquePrefix('approval-shots')}:`;
  let redis: Redis;
  let store: RunStore;
  let notes: RunScreenshotNotes;
  let sessionId: string;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-approval-shots');
    store = new RunStore(redis, prefix);
    notes = new RunScreenshotNotes(redis, prefix);
    sessionId = await createTestSession(store, TENANT, { instructions: 'go' });
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix.slice(0, -1));
    await closeRedis(redis);
  });

  async function parkedWithPreview(): Promise<{ run: RunView; approvalId: string; name: string }> {
    const run = ran(await store.claimRun((await submitStoreRun(store, sessionId)).id, 1, 'w1'));
    const name = newScreenshotName('preview');
    const card: ApprovalCard = {
      element: { role: 'button', name: 'Pay now' },
      action: 'click',
      page_url: 'https://shop.example/checkout',
      page_title: 'Checkout',
      screenshot: name,
      screenshot_status: null,
      file: null,
    };
    await store.notePreviewPending(run.id, name);
    const { approvalId, transition } = await store.requestApproval(run.id, 'w1', {
      invocationId: `${run.id}-a1-s2-i0`,
      tool: 'browser.act',
      arguments: { revision: 'r1', element: 'e2', action: 'click' },
      card,
    });
    expect(transition.ok && transition.detail).toBe('parked');
    return { run, approvalId, name };
  }

  it('reads pending while the preview is taken, then stored, in the tenant’s list, the approval and the run’s list', async () => {
    const { run, approvalId, name } = await parkedWithPreview();
    const reads = async () => ({
      tenant: (await store.listPendingApprovals(TENANT)).find((approval) => approval.id === approvalId)?.card
        ?.screenshot_status,
      one: (await store.getApproval(TENANT, approvalId))?.card?.screenshot_status,
      run: (await store.listRunApprovalsWithGrants(TENANT, run.id, 'any'))?.find(
        (approval) => approval.id === approvalId,
      )?.card?.screenshot_status,
      detail: (await store.listPendingApprovals(TENANT, run.id))[0]?.card?.screenshot_status,
    });
    const pending = { state: 'pending', reason: null };
    expect(await reads()).toEqual({ tenant: pending, one: pending, run: pending, detail: pending });

    await notes.settled(run.id, name, { state: 'stored', reason: null });
    const stored = { state: 'stored', reason: null };
    expect(await reads()).toEqual({ tenant: stored, one: stored, run: stored, detail: stored });
  });
});
