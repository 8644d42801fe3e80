import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import type { TranscriptEntry } from '../../libs/runtime/index.js';
import { RunTranscripts } from '../../libs/store/run-transcript.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { type LoginSite, startLoginSite } from '../fixtures/login-site.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { storedValues } from '../fixtures/redis-values.js';
import { restClient } from '../fixtures/rest.js';

const PASSWORD = 'Quartz-zebra-4711-lantern';

/**
 * A scripted run signs in on a real login page — a password field as
 * pages write it (no role of its own: Playwright's getByRole finds it as a textbox), a server that
 * checks the password, sets a session cookie and redirects to the account page — and the run
 * succeeds on that page. Apart from the run's own submitted script, the password is in no
 * observation, step, event, approval, log line (the fleet's pino output at debug) or Redis value.
 */
describe('a scripted run signs in, and the password stays in the script', { timeout: 180_000 }, () => {
  const prefix = uniquePrefix('login');
  const logLines: string[] = [];
  let fleet: FleetHandle;
  let site: LoginSite;
  let redis: Redis;
  const { call, waitForStatus, boundSession } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    site = await startLoginSite({ ada: PASSWORD });
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logLines.push(chunk.toString('utf8'));
        done();
      },
    });
    fleet = await startTestFleet(
      prefix,
      { LOG_LEVEL: 'debug' },
      // No redaction of our own: whatever the fleet hands its logger is what is searched.
      { logger: pino({ level: 'debug' }, sink) },
    );
    redis = new Redis(testRedisUrl());
  });

  afterAll(async () => {
    await fleet?.close();
    await site?.close();
    if (redis) {
      await deletePrefixedKeys(redis, prefix);
      redis.disconnect();
    }
  });

  it('logs in through the form, reaches the account page, and keeps the password out of every record', async () => {
    const sessionId = await boundSession({
      profileId: 'shopper',
      origin: site.origin,
      instructions: 'Sign in.',
    });
    const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
      input: 'Sign in as ada',
      script: {
        steps: [
          { tool: 'browser.navigate', url: `${site.origin}/` },
          { tool: 'browser.act', target: { role: 'textbox', name: 'Username' }, action: 'fill', text: 'ada' },
          {
            tool: 'browser.act',
            target: { role: 'textbox', name: 'Password' },
            action: 'fill',
            text: PASSWORD,
          },
          {
            tool: 'browser.act',
            target: { role: 'button', name: 'Sign in' },
            action: 'click',
            postcondition: { role: 'heading', name: 'Signed in as ada', wait_ms: 5_000 },
          },
          { tool: 'browser.observe' },
        ],
        answer: 'Signed in as ada.',
      },
    });
    expect(submitted.status).toBe(201);
    const runId = submitted.body.id as string;

    // Each act parks on its own approval (no grant), so the password's fill has an approval card
    // and record of its own; each is read as the person deciding reads it.
    const approvalsSeen: unknown[] = [];
    let run = await waitForStatus(runId, ['parked', 'succeeded', 'failed'], 60_000);
    while (run.status === 'parked') {
      approvalsSeen.push(run.pending_approvals, (await call('GET', `/v1/approvals?run_id=${runId}`)).body);
      const approved = await call('POST', `/v1/approvals/${run.pending_approvals[0].id}/approve`, {});
      expect(approved.status).toBe(200);
      approvalsSeen.push(approved.body);
      run = await waitForStatus(runId, ['parked', 'succeeded', 'failed'], 60_000);
    }
    expect({ status: run.status, error: run.error ?? null }).toEqual({ status: 'succeeded', error: null });
    expect(run.result).toMatchObject({ answer: 'Signed in as ada.' });

    // The server saw the right password once, set its cookie, and greeted the session.
    expect(site.attempts).toEqual([{ username: 'ada', passwordMatched: true }]);
    expect(site.greeted.length).toBeGreaterThanOrEqual(1);
    expect(new Set(site.greeted)).toEqual(new Set(['ada']));

    // The observations: the filled password field says it holds a value, and the run's last
    // observation is the account page.
    const transcript = await new RunTranscripts(redis, `${prefix}:`).load<TranscriptEntry>(runId);
    const observations = transcript.flatMap((entry) => {
      if (entry.kind !== 'tool' || !entry.outcome.ok) return [];
      const result = entry.outcome.result as { observation?: { title: string; elements: unknown[] } };
      return result.observation ? [result.observation] : [];
    });
    expect(observations).toHaveLength(5);
    const afterPassword = observations[2] as {
      elements: Array<{ role: string; name: string; state: unknown }>;
    };
    expect(afterPassword.elements.find((element) => element.name === 'Password')).toMatchObject({
      role: 'textbox',
      state: { value_present: true },
    });
    expect(observations.at(-1)).toMatchObject({
      title: 'Account',
      elements: expect.arrayContaining([
        expect.objectContaining({ role: 'heading', name: 'Signed in as ada' }),
      ]),
    });
    expect(JSON.stringify(observations)).not.toContain(PASSWORD);
    expect(JSON.stringify(transcript)).not.toContain(PASSWORD);

    // Steps, every page of them.
    const steps: unknown[] = [];
    let cursor: string | null = null;
    do {
      const page = await call('GET', `/v1/runs/${runId}/steps?limit=4${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.status).toBe(200);
      steps.push(...page.body.steps);
      cursor = page.body.next_cursor;
    } while (cursor);
    expect(steps.length).toBeGreaterThanOrEqual(11);
    expect(JSON.stringify(steps)).toContain('[secret]');
    expect(JSON.stringify(steps)).not.toContain(PASSWORD);

    // Events, from the stream's start (it ends as the run has ended).
    const events = await fetch(`${fleet.urls.api.replace(/\/v1$/, '')}/v1/runs/${runId}/events`, {
      headers: { authorization: `Bearer ${fleet.apiKey}` },
    });
    const eventText = await events.text();
    expect(eventText).toContain('approval.requested');
    expect(eventText).not.toContain(PASSWORD);

    // Approvals: as each was pending, as decided, and as stored.
    expect(approvalsSeen).toHaveLength(9);
    expect(JSON.stringify(approvalsSeen)).toContain('[secret]');
    expect(JSON.stringify(approvalsSeen)).not.toContain(PASSWORD);
    const stored = await fleet.store.listApprovals(runId);
    expect(stored).toHaveLength(3);
    expect(JSON.stringify(stored)).not.toContain(PASSWORD);

    // The run's own view, but for its input (the script as submitted), and every log line the
    // fleet wrote at debug.
    const { input, ...view } = (await call('GET', `/v1/runs/${runId}`)).body;
    expect(JSON.stringify(input)).toContain(PASSWORD);
    expect(JSON.stringify(view)).not.toContain(PASSWORD);
    expect(logLines.length).toBeGreaterThan(0);
    expect(logLines.filter((line) => line.includes(PASSWORD))).toEqual([]);

    // And in Redis only the run record holds it: the script as its owner submitted it.
    const values = await storedValues(redis, prefix);
    const holding = [...values.entries()].filter(([, value]) => value.includes(PASSWORD)).map(([key]) => key);
    expect(holding).toEqual([`${prefix}:{run:${runId}}:run`]);
  });
});
