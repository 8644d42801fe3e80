import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { Redis } from 'ioredis';
import { ApiError, type RunEvent, type RunView } from '../../libs/contracts/index.js';
import type { RunStore } from '../../libs/store/index.js';
import type { Logger } from '../../libs/telemetry/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';

export interface EventStreamOptions {
  /** Open streams one API key may hold, across replicas (EVENT_STREAMS_PER_KEY). */
  maxPerKey: number;
  /** Keep-alive period (EVENT_STREAM_KEEPALIVE_MS); a slot lives three of them unless renewed. */
  keepAliveMs: number;
}

/** Events one range read sends at most; a longer backlog is read again at once. */
const READ_BATCH = 500;
const END_EVENTS = new Set<RunEvent['type']>(['run.succeeded', 'run.failed', 'run.cancelled']);

interface OpenStream {
  runId: string;
  tenant: string;
  raw: ServerResponse;
  /** The last event id sent (exclusive lower bound of the next read). */
  afterId: string | undefined;
  reading: boolean;
  /** A notification came while a read was in flight: read again when it ends. */
  again: boolean;
  closed: boolean;
  slot: { keyId: string; member: string };
}

/**
 * The API's run event streams (issues 11.5, 11.10). New events reach open streams by notification,
 * not by polling each stream: every script that appends to a run's events publishes on the run's
 * shard channel, this process holds ONE subscriber connection subscribed to the channels of the
 * runs it streams, and each notification costs one range read per stream of that run. Streams are
 * counted per API key in Redis (a slot with an expiry, renewed by the keep-alive), so the limit
 * holds across replicas and a replica that dies frees its slots within three keep-alives.
 */
export class RunEventStreams {
  readonly #byChannel = new Map<string, Set<OpenStream>>();
  readonly #all = new Set<OpenStream>();
  readonly #processId = randomBytes(6).toString('hex');
  #counter = 0;
  #keepAlive: NodeJS.Timeout | undefined;
  #closing: Promise<void> | undefined;

  private constructor(
    private readonly subscriber: Redis,
    private readonly store: RunStore,
    private readonly options: EventStreamOptions,
    private readonly log: Logger,
  ) {
    subscriber.on('smessage', (channel: string) => {
      for (const stream of this.#byChannel.get(channel) ?? []) this.#pump(stream);
    });
    // ioredis subscribes again after a reconnect; what was published meanwhile is read now.
    let connected = true;
    subscriber.on('close', () => {
      connected = false;
    });
    subscriber.on('ready', () => {
      if (connected) return;
      connected = true;
      for (const stream of this.#all) this.#pump(stream);
    });
    this.#keepAlive = setInterval(() => this.#keepStreamsAlive(), options.keepAliveMs);
    this.#keepAlive.unref();
  }

  static async start(
    redisUrl: string,
    store: RunStore,
    options: EventStreamOptions,
    log: Logger,
  ): Promise<RunEventStreams> {
    const subscriber = await connectRedis(redisUrl, 'worker', 'api-events');
    return new RunEventStreams(subscriber, store, options, log);
  }

  get slotTtlMs(): number {
    return this.options.keepAliveMs * 3;
  }

  /**
   * Serves `run`'s events after `afterId` (already checked) as Server-Sent Events. Refuses with
   * 429 before anything is sent when the key holds its maximum of open streams.
   */
  async serve(reply: FastifyReply, run: RunView, afterId: string | undefined, keyId: string): Promise<void> {
    if (this.#closing) throw new ApiError('unavailable', 'the API is shutting down');
    const slot = { keyId, member: `${this.#processId}:${++this.#counter}` };
    if (!(await this.store.openStreamSlot(keyId, slot.member, this.options.maxPerKey, this.slotTtlMs)))
      throw new ApiError(
        'rate_limited',
        `at most ${this.options.maxPerKey} open event streams per API key; close one first`,
      );
    const stream: OpenStream = {
      runId: run.id,
      tenant: run.tenant,
      raw: reply.raw,
      afterId,
      reading: false,
      again: false,
      closed: false,
      slot,
    };
    reply.hijack();
    stream.raw.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    this.#all.add(stream);
    // The response's close: the client went away (or the stream ended).
    stream.raw.once('close', () => void this.#finish(stream));
    try {
      // Subscribed before the first read: an event appended in between is either read now or
      // notified after.
      await this.#subscribe(stream);
      this.#pump(stream, run.ended_at_ms !== null);
    } catch (error) {
      this.log.warn({ run_id: run.id, err: error }, 'event stream could not start');
      await this.#finish(stream);
    }
  }

  async #subscribe(stream: OpenStream): Promise<void> {
    const channel = this.store.eventsChannel(stream.runId);
    let streams = this.#byChannel.get(channel);
    if (!streams) {
      streams = new Set();
      this.#byChannel.set(channel, streams);
      streams.add(stream);
      await this.subscriber.ssubscribe(channel);
    } else {
      streams.add(stream);
    }
  }

  /** Sends what was appended since the stream's last id; ends the stream after the run's end. */
  #pump(stream: OpenStream, endedAtStart = false): void {
    if (stream.closed) return;
    if (stream.reading) {
      stream.again = true;
      return;
    }
    stream.reading = true;
    void (async () => {
      try {
        let sawEnd = endedAtStart;
        do {
          stream.again = false;
          const events = await this.store.readEvents(stream.runId, {
            ...(stream.afterId ? { afterId: stream.afterId } : {}),
            count: READ_BATCH,
          });
          for (const event of events) {
            if (stream.closed) return;
            stream.raw.write(`id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
            stream.afterId = event.id;
            if (END_EVENTS.has(event.type)) sawEnd = true;
          }
          if (events.length === READ_BATCH) stream.again = true;
        } while (stream.again && !stream.closed);
        // An end event may be followed by a retry; the record says whether the run is still over.
        if (sawEnd && (await this.store.getRun(stream.runId, stream.tenant))?.ended_at_ms != null) {
          await this.#finish(stream);
        }
      } catch (error) {
        this.log.warn({ run_id: stream.runId, err: error }, 'event stream read failed; ending the stream');
        await this.#finish(stream);
      } finally {
        stream.reading = false;
      }
    })();
  }

  async #finish(stream: OpenStream): Promise<void> {
    if (stream.closed) return;
    stream.closed = true;
    this.#all.delete(stream);
    if (!stream.raw.writableEnded) stream.raw.end();
    const channel = this.store.eventsChannel(stream.runId);
    const streams = this.#byChannel.get(channel);
    streams?.delete(stream);
    try {
      if (streams && streams.size === 0) {
        this.#byChannel.delete(channel);
        await this.subscriber.sunsubscribe(channel);
      }
      await this.store.closeStreamSlot(stream.slot.keyId, stream.slot.member);
    } catch (error) {
      // The slot expires on its own within three keep-alives.
      this.log.warn({ run_id: stream.runId, err: error }, 'event stream clean-up failed');
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

  /** Ends every open stream (their clients reconnect elsewhere with Last-Event-ID) and disconnects. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      clearInterval(this.#keepAlive);
      await Promise.all([...this.#all].map((stream) => this.#finish(stream)));
      await closeRedis(this.subscriber);
    })();
    return this.#closing;
  }
}
