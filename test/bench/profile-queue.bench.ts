import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { startLineSite } from '../fixtures/line-site.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';
import { figure, report } from './report.js';

const SUITE = 'profile-queue';
const RUNS = 20;
const ENDED = ['succeeded', 'failed', 'cancelled'];

/**
 * Runs wait their turn for a profile: 20 runs on one profile submitted at once
 * (`profile_queue_total_ms`, submit of the first to end of the last) beside the same runs one by
 * one, each submitted when the one before has ended (`profile_queue_solo_sum_ms`, the sum of
 * their submit-to-end times). The ratio is what waiting in line costs; target ≤ 1.2.
 */
export default async function profileQueueBench(): Promise<void> {
  const site = await startLineSite();
  const fleet: FleetHandle = await startTestFleet(uniquePrefix('bench-profile-queue'));
  const { call, waitForStatus, boundSession } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  try {
    const sessionId = await boundSession({ profileId: 'line', origin: site.origin, instructions: 'Go.' });
    const submit = async (n: number): Promise<string> => {
      const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
        input: `run ${n}`,
        script: { steps: [{ tool: 'browser.navigate', url: `${site.origin}/run/${n}` }], answer: 'ok' },
      });
      if (submitted.status !== 201) throw new Error(`submit answered ${submitted.status}`);
      return submitted.body.id as string;
    };
    // Times from the runs' own records (submitted, ended), not from this client's polling.
    const ended = async (runId: string): Promise<{ createdMs: number; endedMs: number }> => {
      const run = await waitForStatus(runId, ENDED, 120_000);
      if (run.status !== 'succeeded') throw new Error(`run ${runId} ended ${run.status}`);
      return { createdMs: run.created_at_ms, endedMs: run.ended_at_ms };
    };

    // Warm-up: the first context of the profile and the code paths.
    await ended(await submit(-1));

    let soloSumMs = 0;
    for (let n = 0; n < RUNS; n += 1) {
      const run = await ended(await submit(n));
      soloSumMs += run.endedMs - run.createdMs;
    }

    const runIds: string[] = [];
    for (let n = 0; n < RUNS; n += 1) runIds.push(await submit(RUNS + n));
    const runs = [];
    for (const runId of runIds) runs.push(await ended(runId));
    const totalMs =
      Math.max(...runs.map((run) => run.endedMs)) - Math.min(...runs.map((run) => run.createdMs));

    report(
      figure(SUITE, 'profile_queue_total_ms', totalMs, {
        metric: 'profile_queue_solo_sum_ms',
        value: soloSumMs,
      }),
    );
  } finally {
    await fleet.close();
    await site.close();
  }
}
