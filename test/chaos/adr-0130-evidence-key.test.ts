import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TranscriptEntry } from '../../libs/runtime/index.js';
import type { RunStore } from '../../libs/store/index.js';
import type { RunTranscripts } from '../../libs/store/run-transcript.js';
import { type RigRunSide, startRigRunSide, submitTestRun } from '../fixtures/execute-run.js';
import { ACT_PATH, type LeaseRig, NAVIGATE_PATH, OBSERVE_PATH } from '../fixtures/lease-rig.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { storedValues } from '../fixtures/redis-values.js';

/**
 * ADR-0130 d7: "A tool may attach an evidence key to a successful result. The platform computes it,
 * and the model never sees it. It is never part of a stored result." Driven through the run
 * worker's composition against a real lease service; the keys the service answered are read off the
 * wire (the proxy), then looked for in everything Redis holds.
 */
describe('the evidence key stays with the platform', () => {
  const prefix = uniquePrefix('chaos-evidence');
  let rig: LeaseRig;
  let side: RigRunSide;
  let store: RunStore;
  let transcripts: RunTranscripts;

  beforeAll(async () => {
    side = await startRigRunSide({
      prefix,
      principal: 'alice',
      profileIds: 'lesson',
      page: '<!doctype html><title>lesson</title><p>Pick the word</p><button onclick="this.textContent = \'Checked\'">Check</button>',
    });
    ({ rig, store, transcripts } = side);
  });

  afterAll(async () => {
    await side?.close();
  });

  it('never appears in a stored ledger entry, transcript, run event or any other record', async () => {
    const profileId = await rig.newProfile({ id: 'lesson-evidence' });
    const submitted = await submitTestRun(store, {
      agent: { model: 'scripted', instructions: 'learn' },
      browserProfileId: profileId,
      input: {
        text: 'do the exercise',
        script: {
          steps: [
            { tool: 'browser.navigate', url: `${rig.origin}/lesson` },
            { tool: 'browser.observe' },
            { tool: 'browser.observe' },
          ],
          answer: 'done',
        },
      },
    });

    const { end } = await side.execute(submitted);
    expect(end).toEqual({ kind: 'succeeded', answer: 'done' });

    // The keys the service attached to its three answers, as they crossed the wire.
    const answered = [NAVIGATE_PATH, OBSERVE_PATH, ACT_PATH]
      .flatMap((path) => rig.seenFor(path, profileId))
      .map((request) => JSON.parse(request.upstreamBody?.toString() ?? '{}') as { evidence_key?: unknown });
    const evidenceKeys = answered.flatMap((answer) =>
      typeof answer.evidence_key === 'string' ? [answer.evidence_key] : [],
    );
    expect(evidenceKeys).toHaveLength(3);

    // What is stored is not empty: three results with their observations, and the events.
    const ledger = await store.listInvocations(submitted.id);
    expect(ledger.map((entry) => entry.state)).toEqual(['completed', 'completed', 'completed']);
    const tools = (await transcripts.load<TranscriptEntry>(submitted.id)).filter(
      (entry) => entry.kind === 'tool',
    );
    expect(tools).toHaveLength(3);
    expect(JSON.stringify(tools)).toContain('Pick the word');
    expect((await store.readEvents(submitted.id)).length).toBeGreaterThan(0);

    const stored = [...(await storedValues(rig.redis, rig.keyPrefix)).values()].join('\n');
    for (const key of evidenceKeys) {
      expect(JSON.stringify(ledger)).not.toContain(key);
      expect(JSON.stringify(tools)).not.toContain(key);
      expect(JSON.stringify(await store.readEvents(submitted.id))).not.toContain(key);
      expect(stored).not.toContain(key);
    }
  });
});
