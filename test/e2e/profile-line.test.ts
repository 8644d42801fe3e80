import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { type LineSite, startLineSite } from '../fixtures/line-site.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

const ENDED = ['succeeded', 'failed', 'cancelled'];
const RUNS = 20;

/**
 * Runs wait their turn for a profile: 20 runs submitted at once on one website profile
 * all succeed, one after another, in submit order — on a real fleet and Chromium. A run behind
 * another waits `queued` with `waiting_for: "profile"` and starts when the page is free.
 */
describe('runs of one profile, submitted at once', { timeout: 120_000 }, () => {
  let fleet: FleetHandle;
  let site: LineSite;
  const { call, waitForStatus, boundSession } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    site = await startLineSite();
    fleet = await startTestFleet(uniquePrefix('profile-line'), { RUN_WORKER_CONCURRENCY: '8' });
  });
  afterAll(async () => {
    await fleet?.close();
    await site?.close();
  });

  it('all succeed, one after another, in submit order', async () => {
    const sessionId = await boundSession({ profileId: 'line', origin: site.origin, instructions: 'Go.' });
    const runIds: string[] = [];
    for (let n = 0; n < RUNS; n += 1) {
      const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
        input: `run ${n}`,
        script: {
          steps: [{ tool: 'browser.navigate', url: `${site.origin}/run/${n}` }],
          answer: `done ${n}`,
        },
      });
      expect(submitted.status).toBe(201);
      runIds.push(submitted.body.id);
    }
    // While the first runs, a later one is seen waiting for the profile.
    const later = await waitForStatus(runIds[RUNS - 1] as string, ['queued', ...ENDED]);
    const ends = [];
    for (const runId of runIds) ends.push(await waitForStatus(runId, ENDED, 90_000));

    expect(ends.map((run) => run.status)).toEqual(Array(RUNS).fill('succeeded'));
    expect(site.visits).toEqual(Array.from({ length: RUNS }, (_, n) => `/run/${n}`));
    // One after another: each run ended before the next one's page was asked for.
    const endedAt = ends.map((run) => run.ended_at_ms as number);
    expect(endedAt).toEqual([...endedAt].sort((a, b) => a - b));
    expect(['profile', null]).toContain(later.waiting_for);
    const waited = await Promise.all(
      runIds.map(async (runId) =>
        (await fleet.store.readEvents(runId)).some((event) => event.type === 'run.waiting'),
      ),
    );
    expect(waited.filter(Boolean).length).toBeGreaterThan(0);
  });
});
