import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { ApiError, type RunEvent, type RunView, tenantRunEventSchema } from '../contracts/index.js';

export interface EventStreamOptions {
  /** Open streams one API key may hold, across replicas (EVENT_STREAMS_PER_KEY). */
  maxPerKey: number;
  /** Keep-alive period (EVENT_STREAM_KEEPALIVE_MS); a slot lives three of them unless renewed. */
  keepAliveMs: number;
}

/** What the streams read and count in the store (the run store fits). */
export interface RunEventSource {
  getRun(runId: string, tenant?: string): Promise<RunView | undefined>;
  readEvents(runId: string, options: { afterId?: string; count?: number }): Promise<RunEvent[]>;
  /** The shard channel every script that appends to the run's events publishes on. */
  eventsChannel(runId: string): string;
  /** The (plain) channel each status event of the tenant's runs is published on. */
  tenantRunEventsChannel(tenant: string): string;
  openStreamSlot(keyId: string, member: string, max: number, ttlMs: number): Promise<boolean>;
  renewStreamSlots(slots: ReadonlyArray<{ keyId: string; member: string }>, ttlMs: number): Promise<void>;
  closeStreamSlot(keyId: string, member: string): Promise<void>;
}

/** Events one range read sends at most; a longer backlog is read again at once. */
const READ_BATCH = 500;
const END_EVENTS = new Set<RunEvent['type']>(['run.succeeded', 'run.failed', 'run.cancelled']);

interface OpenStream {
  /** The channel of its feed: a run's (sharded) or a tenant's (plain). */
  channel: string;
  /** What it streams, for the logs: a run id, or `tenant:<tenant>`. */
  subject: string;
  raw: ServerResponse;
  /** The last event id sent (exclusive lower bound of what it is sent next). */
  afterId: string | undefined;
  closed: boolean;
  slot: { keyId: string; member: string };
}

/** The open streams of one run in this process: one subscription, one range read per notification. */
interface RunFeed {
  runId: string;
  tenant: string;
  channel: string;
  streams: Set<OpenStream>;
  reading: boolean;
  /** A notification (or a new stream) came while a read was in flight: read again when it ends. */
  again: boolean;
  /** The run had ended when a stream joined: check the record after the next read. */
  checkEnd: boolean;
}

/** The earliest position among `streams` (undefined, the start of the stream, before all). */
function earliestPosition(streams: readonly OpenStream[]): string | undefined {
  let earliest = streams[0]?.afterId;
  for (const { afterId } of streams) {
    if (afterId === undefined) return undefined;
    if (earliest !== undefined && isAfter(earliest, afterId)) earliest = afterId;
  }
  return earliest;
}

/** Stream ids compare by their millisecond part, then their sequence; undefined is before all. */
function isAfter(id: string, afterId: string | undefined): boolean {
  if (afterId === undefined) return true;
  const [ms, seq] = id.split('-').map(Number);
  const [afterMs, afterSeq] = afterId.split('-').map(Number);
  return (ms ?? 0) > (afterMs ?? 0) || (ms === afterMs && (seq ?? 0) > (afterSeq ?? 0));
}

/**
 * The API's run event streams (11.10). New events reach open streams by notification,
 * not by polling each stream: every script that appends to a run's events publishes on the run's
 * shard channel, this process holds ONE subscriber connection subscribed to the channels of the
 * runs it streams (the caller's connection, which it closes after {@link RunEventStreams.close}),
 * and each notification costs one range read of that run, shared by all of its
 * open streams here (each is sent what lies past its own last id). Streams are
 * counted per API key in Redis (a slot with an expiry, renewed by the keep-alive), so the limit
 * holds across replicas and a replica that dies frees its slots within three keep-alives.
 */
export class RunEventStreams {
  readonly #feeds = new Map<string, RunFeed>();
  /** The tenants' feeds, by channel: the open tenant streams of each. */
  readonly #tenantFeeds = new Map<string, Set<OpenStream>>();
  readonly #all = new Set<OpenStream>();
  readonly #processId = randomBytes(6).toString('hex');
  #counter = 0;
  #keepAlive: NodeJS.Timeout | undefined;
  #closing: Promise<void> | undefined;

  constructor(
    private readonly subscriber: Redis | Cluster,
    private readonly store: RunEventSource,
    private readonly options: EventStreamOptions,
    private readonly log: Logger,
  ) {
    subscriber.on('smessage', (channel: string) => {
      const feed = this.#feeds.get(channel);
      if (feed) this.#pump(feed);
    });
    subscriber.on('message', (channel: string, message: string) => {
      const feed = this.#tenantFeeds.get(channel);
      if (feed) this.#sendTenantEvent(feed, message);
    });
    // ioredis subscribes again after a reconnect; what was published meanwhile is read now.
    let connected = true;
    subscriber.on('close', () => {
      connected = false;
    });
    subscriber.on('ready', () => {
      if (connected) return;
      connected = true;
      for (const feed of this.#feeds.values()) this.#pump(feed);
    });
    this.#keepAlive = setInterval(() => this.#keepStreamsAlive(), options.keepAliveMs);
    this.#keepAlive.unref();
  }

  get slotTtlMs(): number {
    return this.options.keepAliveMs * 3;
  }

  /**
   * Serves `run`'s events after `afterId` (already checked) as Server-Sent Events. Refuses with
   * 429 before anything is sent when the key holds its maximum of open streams.
   */
  async serve(reply: FastifyReply, run: RunView, afterId: string | undefined, keyId: string): Promise<void> {
    const stream = await this.#open(reply, keyId, this.store.eventsChannel(run.id), run.id, afterId);
    try {
      // Subscribed before the first read: an event appended in between is either read now or
      // notified after.
      const feed = await this.#join(stream, run);
      if (run.ended_at_ms !== null) feed.checkEnd = true;
      this.#pump(feed);
    } catch (error) {
      this.log.warn({ run_id: run.id, err: error }, 'event stream could not start');
      await this.#finish(stream);
    }
  }

  /**
   * Serves the status events of `tenant`'s runs as they happen (a run submitted, claimed, parked,
   * ended…), each with its run's id; counted with the key's run streams. Live only: nothing is
   * replayed, a client that reconnects reads `GET /v1/runs` for what it missed.
   */
  async serveTenant(reply: FastifyReply, tenant: string, keyId: string): Promise<void> {
    const channel = this.store.tenantRunEventsChannel(tenant);
    const stream = await this.#open(reply, keyId, channel, `tenant:${tenant}`, undefined);
    try {
      const feed = this.#tenantFeeds.get(channel);
      if (feed) feed.add(stream);
      else {
        this.#tenantFeeds.set(channel, new Set([stream]));
        await this.subscriber.subscribe(channel);
      }
      // Said once subscribed: every event from now on reaches this stream, so a client that reads
      // the list after `ready` misses nothing between the two.
      stream.raw.write('event: ready\ndata: {}\n\n');
    } catch (error) {
      this.log.warn({ tenant, err: error }, 'tenant event stream could not start');
      await this.#finish(stream);
    }
  }

  /** Takes one of the key's stream slots (429 past them) and starts the response. */
  async #open(
    reply: FastifyReply,
    keyId: string,
    channel: string,
    subject: string,
    afterId: string | undefined,
  ): Promise<OpenStream> {
    if (this.#closing) throw new ApiError('unavailable', 'the API is shutting down');
    const slot = { keyId, member: `${this.#processId}:${++this.#counter}` };
    if (!(await this.store.openStreamSlot(keyId, slot.member, this.options.maxPerKey, this.slotTtlMs)))
      throw new ApiError(
        'rate_limited',
        `at most ${this.options.maxPerKey} open event streams per API key; close one first`,
      );
    const stream: OpenStream = { channel, subject, raw: reply.raw, afterId, closed: false, slot };
    reply.hijack();
    stream.raw.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    this.#all.add(stream);
    // The response's close: the client went away (or the stream ended).
    stream.raw.once('close', () => void this.#finish(stream));
    return stream;
  }

  /** A tenant's status event, checked, to each of its open streams. */
  #sendTenantEvent(streams: Set<OpenStream>, message: string): void {
    let event: ReturnType<typeof tenantRunEventSchema.parse>;
    try {
      event = tenantRunEventSchema.parse(JSON.parse(message));
    } catch (error) {
      this.log.warn({ err: error }, 'tenant run event not understood; not sent');
      return;
    }
    const text = `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
    for (const stream of streams) if (!stream.closed) stream.raw.write(text);
  }

  async #join(stream: OpenStream, run: RunView): Promise<RunFeed> {
    const channel = stream.channel;
    const existing = this.#feeds.get(channel);
    if (existing) {
      existing.streams.add(stream);
      return existing;
    }
    const feed: RunFeed = {
      runId: run.id,
      tenant: run.tenant,
      channel,
      streams: new Set([stream]),
      reading: false,
      again: false,
      checkEnd: false,
    };
    this.#feeds.set(channel, feed);
    await this.subscriber.ssubscribe(channel);
    return feed;
  }

  /**
   * One range read for every stream of the run, from the earliest position among them; each is
   * sent what lies past its own. Ends them all after the run's end.
   */
  #pump(feed: RunFeed): void {
    if (feed.reading) {
      feed.again = true;
      return;
    }
    feed.reading = true;
    void (async () => {
      try {
        let sawEnd = false;
        do {
          feed.again = false;
          const streams = [...feed.streams];
          if (streams.length === 0) return;
          const from = earliestPosition(streams);
          const events = await this.store.readEvents(feed.runId, {
            ...(from ? { afterId: from } : {}),
            count: READ_BATCH,
          });
          for (const stream of streams) {
            for (const event of events) {
              if (stream.closed || !isAfter(event.id, stream.afterId)) continue;
              stream.raw.write(`id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
              stream.afterId = event.id;
            }
          }
          if (events.some((event) => END_EVENTS.has(event.type))) sawEnd = true;
          if (events.length === READ_BATCH) feed.again = true;
        } while (feed.again);
        // An end event may be followed by a retry; the record says whether the run is still over.
        if (sawEnd || feed.checkEnd) {
          feed.checkEnd = false;
          if ((await this.store.getRun(feed.runId, feed.tenant))?.ended_at_ms != null)
            await Promise.all([...feed.streams].map((stream) => this.#finish(stream)));
        }
      } catch (error) {
        this.log.warn({ run_id: feed.runId, err: error }, 'event stream read failed; ending its streams');
        await Promise.all([...feed.streams].map((stream) => this.#finish(stream)));
      } finally {
        feed.reading = false;
      }
    })();
  }

  async #finish(stream: OpenStream): Promise<void> {
    if (stream.closed) return;
    stream.closed = true;
    this.#all.delete(stream);
    if (!stream.raw.writableEnded) stream.raw.end();
    const { channel } = stream;
    const feed = this.#feeds.get(channel);
    feed?.streams.delete(stream);
    const tenantFeed = this.#tenantFeeds.get(channel);
    tenantFeed?.delete(stream);
    try {
      if (feed && feed.streams.size === 0) {
        this.#feeds.delete(channel);
        await this.subscriber.sunsubscribe(channel);
      }
      if (tenantFeed && tenantFeed.size === 0) {
        this.#tenantFeeds.delete(channel);
        await this.subscriber.unsubscribe(channel);
      }
      await this.store.closeStreamSlot(stream.slot.keyId, stream.slot.member);
    } catch (error) {
      // The slot expires on its own within three keep-alives.
      this.log.warn({ stream: stream.subject, err: error }, 'event stream clean-up failed');
    }
  }

  /** One comment per open stream and one pipelined slot renewal for all of them. */
  #keepStreamsAlive(): void {
    const open = [...this.#all];
    for (const stream of open) stream.raw.write(': keep-alive\n\n');
    this.store
      .renewStreamSlots(
        open.map((stream) => stream.slot),
        this.slotTtlMs,
      )
      .catch((error: unknown) => this.log.warn({ err: error }, 'event stream slots not renewed'));
  }

  /** Ends every open stream (their clients reconnect elsewhere with Last-Event-ID). */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      clearInterval(this.#keepAlive);
      await Promise.all([...this.#all].map((stream) => this.#finish(stream)));
    })();
    return this.#closing;
  }
}
