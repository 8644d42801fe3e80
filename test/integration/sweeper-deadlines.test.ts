import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunView } from '../../libs/contracts/index.js';
import type { RunStore } from '../../libs/store/index.js';
import type { Metrics } from '../../libs/telemetry/index.js';
import { eventually } from '../fixtures/eventually.js';
import { ran, TEST_RUN_LIMITS } from '../fixtures/run-store.js';
import { type SweptStore, startSweptStore } from '../fixtures/sweeper.js';

const TENANT = 'acme';

/** Polls with this file's patience. */
const poll = <T>(read: () => Promise<T>, done: (value: T) => boolean) => eventually(read, done, 5_000, 25);

describe('the sweeper: deadlines', () => {
  let swept: SweptStore;
  let store: RunStore;
  let metrics: Metrics;
  let sessionId: string;

  beforeAll(async () => {
    swept = await startSweptStore('sweeper-deadlines', TENANT);
    ({ store, metrics, sessionId } = swept);
  });
  afterAll(async () => {
    await swept?.close();
  });

  async function submit(timeoutMs: number): Promise<RunView> {
    const { run } = await store.submitRun({
      tenant: TENANT,
      principal: 'alice',
      sessionId,
      input: null,
      limits: TEST_RUN_LIMITS,
      timeoutMs,
    });
    return run;
  }

  it('fails a parked run past its deadline, expires its approval and counts it', async () => {
    const run = await submit(300);
    ran(await store.claimRun(run.id, 1, 'w1'));
    const { approvalId } = await store.requestApproval(run.id, 'w1', {
      invocationId: 'a1:1:0',
      tool: 'browser.act',
      arguments: {},
    });
    const patient = await submit(600_000);

    const failed = await poll(
      () => store.getRun(run.id),
      (current) => current?.status === 'failed',
    );
    expect(failed).toMatchObject({ status: 'failed', error: { code: 'deadline_exceeded' } });
    expect((await store.getApproval(TENANT, approvalId))?.status).toBe('expired');
    expect(await store.listPendingApprovals(TENANT)).toEqual([]);
    expect((await store.getRun(patient.id))?.status).toBe('queued');

    const counter = await metrics.registry.getSingleMetric('leasehold_runs_deadline_exceeded_total')?.get();
    expect(counter?.values[0]?.value).toBe(1);
    // The approval's wait, from its request to its expiry by the sweeper's fail.
    const expiredWaits = async () =>
      (await metrics.registry.getSingleMetric('leasehold_approval_wait_seconds')?.get())?.values.find(
        (value) =>
          (value as { metricName?: string }).metricName === 'leasehold_approval_wait_seconds_count' &&
          value.labels.decision === 'expired',
      )?.value;
    expect(await poll(expiredWaits, (count) => count === 1)).toBe(1);
  });
});
