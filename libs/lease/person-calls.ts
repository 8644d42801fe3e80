import type {
  LivePerson,
  PersonControlAnswer,
  PersonControlEndAnswer,
  PersonInput,
  ProfileRef,
  StartPersonControl,
} from '../contracts/index.js';
import { DataPlaneError } from './errors.js';
import { afterLeaseCalls, type HeldLease, type PersonHold, personHolds } from './held-lease.js';
import { LiveFeed, type LiveViewer } from './live-feed.js';
import type { LeaseStore } from './ports.js';

/** A person's input events a second on one lease, at most (a burst of as many is let through). */
export const PERSON_INPUT_EVENTS_PER_SECOND = 200;
/** How long one batch of input may take on the page (a page held by a dialog takes no input). */
const INPUT_BATCH_BOUND_MS = 5_000;

export interface LeasePersonCallsDeps {
  store: LeaseStore;
  clock: () => number;
  /** The leases whose contexts this process holds: the service's own map. */
  held: ReadonlyMap<string, HeldLease>;
}

/**
 * A person on a lease's page: the live view's viewers, and person control — one holder at a time,
 * whose input goes to the current tab while every page call of the agent is refused before
 * dispatch (`person_in_control`). The lease's sequence advances when a control begins, with each
 * batch of input and when it ends, so no reference of the agent's survives a person's change.
 * What a person types is never logged or kept: only how many events they sent.
 */
export class LeasePersonCalls {
  readonly #deps: LeasePersonCallsDeps;
  readonly #buckets = new WeakMap<HeldLease, { tokens: number; atMs: number }>();
  readonly #expiries = new WeakMap<HeldLease, NodeJS.Timeout>();

  constructor(deps: LeasePersonCallsDeps) {
    this.#deps = deps;
  }

  /** Adds a viewer of the lease's live view; answers the call that removes it. */
  async watch(profile: ProfileRef, leaseId: string, viewer: LiveViewer): Promise<() => void> {
    const held = await this.#require(profile, leaseId);
    const session = await held.session;
    held.live ??= new LiveFeed(session, () => this.#livePerson(held));
    return held.live.watch(viewer);
  }

  /** The live view of a lease held here, if anyone watches or watched it (tests and benchmarks). */
  feedOf(leaseId: string): LiveFeed | undefined {
    return this.#deps.held.get(leaseId)?.live;
  }

  async start(profile: ProfileRef, leaseId: string, body: StartPersonControl): Promise<PersonControlAnswer> {
    const held = await this.#require(profile, leaseId);
    const nowMs = this.#deps.clock();
    const untilMs = nowMs + body.seconds * 1_000;
    if (personHolds(held, nowMs)) {
      if (held.person.holder !== body.holder)
        throw new DataPlaneError('person_in_control', `another person holds the page of lease ${leaseId}`);
      held.person.untilMs = untilMs;
      this.#expireAt(held);
      held.live?.tellState();
      return { sequence: held.person.sequence, since_ms: held.person.sinceMs, until_ms: untilMs };
    }
    // Held from now on: an agent's call that arrives meanwhile is refused; those already under way
    // finish first, and only then does the page become the person's.
    const hold: PersonHold = { holder: body.holder, sinceMs: nowMs, untilMs, inputs: 0, sequence: 0 };
    held.person = hold;
    try {
      hold.sequence = await afterLeaseCalls(held, () => this.#advance(profile, leaseId, hold));
    } catch (error) {
      if (held.person === hold) held.person = undefined;
      throw error;
    }
    this.#expireAt(held);
    held.live?.tellState();
    return { sequence: hold.sequence, since_ms: hold.sinceMs, until_ms: hold.untilMs };
  }

  /** Ends the holder's control (also once it ran out by itself): the page is the agent's again. */
  async end(profile: ProfileRef, leaseId: string, holder: string): Promise<PersonControlEndAnswer> {
    const held = await this.#require(profile, leaseId);
    const hold = held.person;
    if (hold?.holder !== holder)
      throw new DataPlaneError(
        'person_not_in_control',
        `the caller does not hold the page of lease ${leaseId}`,
      );
    return afterLeaseCalls(held, async () => {
      const sequence = await this.#advance(profile, leaseId, hold);
      const session = await held.session;
      const endedMs = this.#deps.clock();
      if (held.person === hold) held.person = undefined;
      clearTimeout(this.#expiries.get(held));
      held.live?.tellState();
      return {
        sequence,
        since_ms: hold.sinceMs,
        ended_ms: Math.min(endedMs, hold.untilMs),
        inputs: hold.inputs,
        url: session.currentTab?.().page.url() ?? '',
      };
    });
  }

  /** One batch of the holder's input, on the current tab, after the sequence advanced. */
  async input(profile: ProfileRef, leaseId: string, body: PersonInput): Promise<{ sequence: number }> {
    const held = await this.#require(profile, leaseId);
    const nowMs = this.#deps.clock();
    if (!personHolds(held, nowMs) || held.person.holder !== body.holder)
      throw new DataPlaneError(
        'person_not_in_control',
        `the caller does not hold the page of lease ${leaseId}`,
      );
    const hold = held.person;
    this.#spend(held, body.events.length, leaseId);
    return afterLeaseCalls(held, async () => {
      const session = await held.session;
      if (!session.personInput) throw new DataPlaneError('internal', 'this page takes no person input');
      const sequence = await this.#advance(profile, leaseId, hold);
      hold.inputs += body.events.length;
      await session.personInput(body.events, { deadlineMs: Date.now() + INPUT_BATCH_BOUND_MS });
      held.live?.checkBlocked();
      return { sequence };
    });
  }

  /** Every live view's streams end (the data plane is closing). */
  async endStreams(): Promise<void> {
    await Promise.all([...this.#deps.held.values()].map((held) => held.live?.close()));
  }

  /** The lease's page goes away: its viewers' streams end. */
  async closed(held: HeldLease): Promise<void> {
    clearTimeout(this.#expiries.get(held));
    await held.live?.close();
  }

  #livePerson(held: HeldLease): LivePerson {
    if (!personHolds(held, this.#deps.clock())) return null;
    const { holder, sinceMs, untilMs } = held.person;
    return { holder, since_ms: sinceMs, until_ms: untilMs };
  }

  /** The viewers are told when the hold runs out by itself. */
  #expireAt(held: HeldLease): void {
    clearTimeout(this.#expiries.get(held));
    const hold = held.person;
    if (!hold) return;
    // The service's clock may stand still (tests move it): an unexpired hold is looked at again later.
    const waitMs = Math.max(1_000, hold.untilMs - this.#deps.clock());
    const timer = setTimeout(() => {
      if (held.person !== hold) return;
      if (personHolds(held, this.#deps.clock())) this.#expireAt(held);
      else held.live?.tellState();
    }, waitMs);
    timer.unref();
    this.#expiries.set(held, timer);
  }

  /** A token bucket per lease: past {@link PERSON_INPUT_EVENTS_PER_SECOND} the batch is refused whole. */
  #spend(held: HeldLease, events: number, leaseId: string): void {
    const nowMs = performance.now();
    const bucket = this.#buckets.get(held) ?? { tokens: PERSON_INPUT_EVENTS_PER_SECOND, atMs: nowMs };
    bucket.tokens = Math.min(
      PERSON_INPUT_EVENTS_PER_SECOND,
      bucket.tokens + ((nowMs - bucket.atMs) / 1_000) * PERSON_INPUT_EVENTS_PER_SECOND,
    );
    bucket.atMs = nowMs;
    this.#buckets.set(held, bucket);
    if (bucket.tokens < events)
      throw new DataPlaneError(
        'rate_limited',
        `more than ${PERSON_INPUT_EVENTS_PER_SECOND} input events a second on lease ${leaseId}`,
      );
    bucket.tokens -= events;
  }

  /** Moves the lease's sequence one on (the sequence's own fence, told where it stands). */
  async #advance(profile: ProfileRef, leaseId: string, hold: PersonHold): Promise<number> {
    let next = hold.sequence + 1;
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const outcome = await this.#deps.store.advanceSequence(
        profile,
        leaseId,
        next,
        this.#deps.clock(),
        true,
      );
      switch (outcome.status) {
        case 'ok':
          hold.sequence = outcome.sequence;
          return outcome.sequence;
        case 'sequence_mismatch':
          next = outcome.current + 1;
          continue;
        case 'lease_expired':
          throw new DataPlaneError('lease_expired', `lease ${leaseId} has expired or was revoked`);
        case 'not_found':
          throw new DataPlaneError('not_found', `no lease ${leaseId}`);
      }
    }
    throw new DataPlaneError(
      'provider_unavailable',
      `the sequence of lease ${leaseId} kept moving; try again`,
    );
  }

  /** The lease, held here for this profile; another tenant's or profile's path finds none. */
  async #require(profile: ProfileRef, leaseId: string): Promise<HeldLease> {
    const held = this.#deps.held.get(leaseId);
    if (held && !held.closing && held.profile.tenant === profile.tenant && held.profile.id === profile.id)
      return held;
    const lease = await this.#deps.store.getLease(profile, leaseId);
    if (!lease) throw new DataPlaneError('not_found', `no lease ${leaseId}`);
    throw new DataPlaneError('lease_expired', `lease ${leaseId} has expired or was revoked`);
  }
}
