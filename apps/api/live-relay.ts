import type { FastifyReply } from 'fastify';
import {
  ApiError,
  type LiveEvent,
  type PersonInputEvent,
  type ProfileRef,
} from '../../libs/contracts/index.js';
import { DataPlaneClient, type LeaseRef, ProviderError } from '../../libs/provider/index.js';
import type { UiSessions } from '../../libs/store/index.js';
import { EventStreamWriter } from '../../libs/telemetry/index.js';
import type { ApiOrigins } from './public-origin.js';

/** How often an open live stream checks that its viewer may still watch (a revoked key or session). */
export const LIVE_ACCESS_CHECK_MS = 5_000;
/** How long relaying one batch of input may take. */
const INPUT_RELAY_TIMEOUT_MS = 10_000;

/** What the relay reads to find a lease's browser worker. */
export interface LiveRelayDeps {
  leases: {
    liveLeaseId(profile: ProfileRef): Promise<string | undefined>;
    getLease(
      profile: ProfileRef,
      leaseId: string,
    ): Promise<{ providerRef: string; state: string; scope: { run_id: string } } | undefined>;
  };
  workers: { list(): Promise<Array<{ id: string; url: string }>> };
  dataPlaneToken: string | undefined;
}

/** What the live routes need beside the other v1 routes' dependencies; absent, they answer 409. */
export interface LiveDependencies {
  relay: LiveRelayDeps;
  /** Run-page sessions, to see that a cookie-opened stream's session still stands. */
  sessions?: UiSessions;
  /** The API's own origins: a cookie-opened stream must come from one of its pages. */
  origins?: ApiOrigins;
}

/** A live lease and the data plane of the browser worker that serves it. */
export interface LiveLease {
  lease: LeaseRef;
  client: DataPlaneClient;
}

/**
 * The live lease a page names by its profile and run (a run's: `run_id`; a sign-in's, whatever its
 * scope carries), on a browser worker that is still registered; undefined when there is none (the
 * page has nothing live to show).
 */
export async function findLiveLease(
  deps: LiveRelayDeps,
  profile: ProfileRef,
  holds: (scope: { run_id: string }) => boolean,
): Promise<LiveLease | undefined> {
  if (!deps.dataPlaneToken) return undefined;
  const leaseId = await deps.leases.liveLeaseId(profile);
  if (!leaseId) return undefined;
  const record = await deps.leases.getLease(profile, leaseId);
  if (record?.state !== 'live' || !holds(record.scope)) return undefined;
  const worker = (await deps.workers.list()).find((candidate) => candidate.id === record.providerRef);
  if (!worker) return undefined;
  return {
    lease: { profile, leaseId },
    client: new DataPlaneClient({ baseUrl: worker.url, token: deps.dataPlaneToken }),
  };
}

/**
 * Relays a lease's live view to one viewer as server-sent events (`frame`, `state`, `blocked`):
 * the newest frame only when the viewer is slow, nothing stored. Ends when the lease's stream ends,
 * when the viewer goes, or when `mayStillWatch` (asked every few seconds) says no: a revoked key or
 * a closed session stops the stream.
 */
export async function relayLive(
  reply: FastifyReply,
  live: LiveLease,
  mayStillWatch: () => Promise<boolean>,
  accessCheckMs = LIVE_ACCESS_CHECK_MS,
): Promise<void> {
  const stop = new AbortController();
  let events: AsyncIterable<LiveEvent>;
  try {
    events = await live.client.openLive(live.lease, stop.signal);
  } catch (error) {
    throw relayError(error);
  }
  const stream = new EventStreamWriter(reply.raw);
  reply.hijack();
  const end = () => {
    stop.abort();
    stream.end();
  };
  reply.raw.once('close', end);
  stream.begin();
  const access = setInterval(() => {
    mayStillWatch().then(
      (allowed) => allowed || end(),
      () => end(),
    );
  }, accessCheckMs);
  access.unref();
  void (async () => {
    try {
      for await (const event of events) stream.send(event);
    } catch {
      // The worker's stream broke: the viewer's ends with it (the page reconnects).
    } finally {
      clearInterval(access);
      end();
    }
  })();
}

/** Relays one batch of a person's input; refusals keep their meaning for the caller. */
export async function relayInput(
  live: LiveLease,
  holder: string,
  events: readonly PersonInputEvent[],
): Promise<{ sequence: number }> {
  try {
    return await live.client.sendPersonInput(
      live.lease,
      { holder, events },
      { deadlineMs: Date.now() + INPUT_RELAY_TIMEOUT_MS },
    );
  } catch (error) {
    throw relayError(error);
  }
}

/** A data-plane refusal as the API answers it: never the worker's message or its address. */
function relayError(error: unknown): unknown {
  if (!(error instanceof ProviderError)) return error;
  switch (error.serviceCode) {
    case 'person_not_in_control':
      return new ApiError('conflict', 'the caller does not hold the page: take it over first');
    case 'person_in_control':
      return new ApiError('conflict', 'another person holds the page');
    case 'rate_limited':
      return new ApiError('rate_limited', 'too many input events a second');
    case 'not_found':
    case 'lease_expired':
      return new ApiError('conflict', 'the page is no longer live');
    default:
      return new ApiError('unavailable', 'the browser worker did not answer; try again');
  }
}
