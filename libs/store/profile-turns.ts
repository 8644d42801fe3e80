import type { ProfileRef } from '../contracts/index.js';
import { isSignInId, ProfileSignIns } from './profile-sign-ins.js';
import type { RedisClient } from './redis-client.js';
import { RunKeys } from './run-keys.js';
import { type RunTransition, toTransition } from './run-transition.js';
import { withScripts } from './scripts.js';

/** A run's place in its profile's line: first (it goes on) or behind the run that holds the turn. */
export type TurnVerdict = { turn: true } | { turn: false; holderRunId: string; ahead: number };

/** A profile with a line, as the sweep's walk over them names it. */
export interface ProfileLine {
  profile: ProfileRef;
  firstRunId: string | undefined;
}

/**
 * Runs wait their turn for a profile: each profile has a line of the runs that want its
 * page (`{prf:TENANT/ID}:turns`, scored by submission), taken when a run is claimed. The first run
 * holds the turn until it is done with the page; the others wait `queued` with
 * `waiting_for: "profile"` and no job, and the run that passes the turn wakes the next — no
 * polling. Every script here touches one profile's or one run's keys (one hash slot); the index
 * of profiles with a line (`{turns}:profiles`) is written before the line, so the sweep's walk
 * finds every line a crash might leave with a waiter nobody woke.
 */
export class ProfileTurns {
  readonly #redis: ReturnType<typeof withScripts>;
  readonly #runKeys: RunKeys;
  readonly #signIns: ProfileSignIns;

  constructor(
    redis: RedisClient,
    private readonly prefix: string,
    private readonly now: () => number = Date.now,
  ) {
    this.#redis = withScripts(redis);
    this.#runKeys = new RunKeys(prefix);
    this.#signIns = new ProfileSignIns(redis, prefix, now);
  }

  #lineKey(profile: ProfileRef): string {
    return `${this.prefix}{prf:${profile.tenant}/${profile.id}}:turns`;
  }
  #indexKey(): string {
    return `${this.prefix}{turns}:profiles`;
  }

  /** Puts the run in its profile's line (keeping its place if it is there) and says if it is first. */
  async take(profile: ProfileRef, runId: string): Promise<TurnVerdict> {
    const [submittedUs] = await Promise.all([
      this.#redis.hmget(this.#runKeys.run(runId), 'submitted_us', 'created_at'),
      this.#redis.sadd(this.#indexKey(), `${profile.tenant}/${profile.id}`),
    ]);
    // Runs stored before the line existed have only their submission in ms.
    const score = submittedUs[0] || String(Number(submittedUs[1] ?? 0) * 1000);
    const [verdict, holderRunId, ahead] = await this.#redis.takeTurn(this.#lineKey(profile), runId, score);
    return verdict === 'turn' ? { turn: true } : { turn: false, holderRunId, ahead: Number(ahead) };
  }

  /**
   * A person's sign-in joins the line as a run would, placed now: first only when no run holds or
   * waits for the page (the caller refuses the sign-in otherwise and passes it out again).
   */
  async takeForSignIn(profile: ProfileRef, signInId: string): Promise<TurnVerdict> {
    await this.#redis.sadd(this.#indexKey(), `${profile.tenant}/${profile.id}`);
    const [verdict, holderRunId, ahead] = await this.#redis.takeTurn(
      this.#lineKey(profile),
      signInId,
      String(this.now() * 1000),
    );
    return verdict === 'turn' ? { turn: true } : { turn: false, holderRunId, ahead: Number(ahead) };
  }

  /** Whether a holder of a line that is no run is a sign-in still holding the page. */
  async signInHolds(holderId: string): Promise<boolean> {
    return isSignInId(holderId) && this.#signIns.holds(holderId);
  }

  /** Takes the run out of its profile's line; answers the run first now, if any. */
  async pass(profile: ProfileRef, runId: string): Promise<string | undefined> {
    const [first] = await this.#redis.passTurn(this.#lineKey(profile), runId);
    return first || undefined;
  }

  /** The run first in the profile's line, if any. */
  async first(profile: ProfileRef): Promise<string | undefined> {
    return (await this.#redis.zrange(this.#lineKey(profile), 0, 0))[0];
  }

  /** The runs in the profile's line, first to last. */
  async line(profile: ProfileRef): Promise<string[]> {
    return this.#redis.zrange(this.#lineKey(profile), 0, -1);
  }

  /**
   * A claimed run that is not first waits: `running -> queued` (`waiting_for: "profile"`) by its
   * owner. Refused `cancel_requested` when its cancel is asked: its execution goes on and ends it.
   */
  async waitForProfile(
    runId: string,
    ownerToken: string,
    behind: { holderRunId: string; ahead: number },
  ): Promise<RunTransition<'queued'> | { ok: false; code: 'cancel_requested' }> {
    const reply = await this.#redis.waitForProfile(
      this.#runKeys.run(runId),
      this.#runKeys.events(runId),
      ownerToken,
      this.now(),
      behind.holderRunId,
      behind.ahead,
    );
    if (reply[0] === 'cancel_requested') return { ok: false, code: 'cancel_requested' };
    return toTransition(runId, reply, 'running');
  }

  /** Wakes a run that waits its turn: a new execution, to be enqueued by the caller. */
  async wake(runId: string): Promise<RunTransition<'queued'>> {
    const reply = await this.#redis.wakeRun(
      this.#runKeys.run(runId),
      this.#runKeys.events(runId),
      this.now(),
    );
    return toTransition(runId, reply, 'queued, waiting for its profile');
  }

  /**
   * One page of the profiles with a line (for the sweep: a line whose first run nobody woke), and
   * the cursor of the next page ('0' when the walk is done). Empty lines leave the index.
   */
  async lines(cursor = '0', count = 200): Promise<{ lines: ProfileLine[]; cursor: string }> {
    const [next, members] = await this.#redis.sscan(this.#indexKey(), cursor, 'COUNT', count);
    const lines: ProfileLine[] = [];
    for (const member of members) {
      const slash = member.indexOf('/');
      const profile = { tenant: member.slice(0, slash), id: member.slice(slash + 1) };
      const firstRunId = await this.first(profile);
      if (firstRunId === undefined) await this.#redis.srem(this.#indexKey(), member);
      else lines.push({ profile, firstRunId });
    }
    return { lines, cursor: next };
  }
}
