import { LeaseholdError } from '../contracts/index.js';
import { packJson, unpackJson } from './packed-json.js';
import type { RedisClient } from './redis-client.js';
import { withScripts } from './scripts.js';

/** A transcript longer than this is refused: the step limits end a run long before it. */
const MAX_TRANSCRIPT_ENTRIES = 5_000;

/** The script this file uses (lua/appendTranscript-2.lua), defined on the client by `withScripts`. */
interface TranscriptCommands {
  appendTranscript(
    runKey: string,
    transcriptKey: string,
    ...argv: Array<string | number | Buffer>
  ): Promise<Array<string | number>>;
}

/** `not_owner`: the run is another worker's now (a lost run, not a fault). */
export class TranscriptWriteRefused extends LeaseholdError<'not_owner' | 'too_long'> {
  override readonly name = 'TranscriptWriteRefused';
}

/**
 * A run's transcript (the model's context: input, model turns, tool results) as a Redis list beside
 * the run's record, so a run parked or crashed resumes with it in any worker. Entries are JSON,
 * a large one deflated (`packed-json.ts`): every read of the key goes through here.
 */
export class RunTranscripts {
  readonly #redis: RedisClient & TranscriptCommands;

  constructor(
    redis: RedisClient,
    private readonly prefix: string,
  ) {
    this.#redis = withScripts(redis) as unknown as RedisClient & TranscriptCommands;
  }

  #runKey(runId: string): string {
    return `${this.prefix}{run:${runId}}:run`;
  }
  #key(runId: string): string {
    return `${this.prefix}{run:${runId}}:transcript`;
  }

  async load<T>(runId: string): Promise<T[]> {
    return readTranscript<T>(this.#redis, this.#key(runId));
  }

  /**
   * An earlier attempt's transcript, kept under its number when the run was retried;
   * the current attempt's is `load`. Empty for an attempt that never wrote one.
   */
  async loadAttempt<T>(runId: string, attempt: number): Promise<T[]> {
    return readTranscript<T>(this.#redis, `${this.prefix}{run:${runId}}:transcript:a${attempt}`);
  }

  /**
   * Appends for the run's owner, several entries in one round trip; throws
   * {@link TranscriptWriteRefused} for anyone else, and writes nothing then.
   */
  async append(runId: string, ownerToken: string, ...entries: unknown[]): Promise<void> {
    if (entries.length === 0) return;
    const [status, detail] = (
      await this.#redis.appendTranscript(
        this.#runKey(runId),
        this.#key(runId),
        ownerToken,
        MAX_TRANSCRIPT_ENTRIES,
        ...entries.map(packJson),
      )
    ).map(String);
    if (status === 'not_owner')
      throw new TranscriptWriteRefused(
        'not_owner',
        `run ${runId} is not running under this worker (status ${detail})`,
      );
    if (status === 'too_long')
      throw new TranscriptWriteRefused(
        'too_long',
        `run ${runId} has more than ${MAX_TRANSCRIPT_ENTRIES} transcript entries`,
      );
  }

  /** Seeds a new run's transcript with its input (before any worker owns it). */
  async seed(runId: string, entry: unknown): Promise<void> {
    await this.#redis.rpush(this.#key(runId), packJson(entry));
  }
}

/**
 * A transcript key's entries, packed or plain (`packed-json.ts`): for the store's own readers that
 * hold the key rather than a {@link RunTranscripts} (a retry reads every attempt's).
 */
export async function readTranscript<T>(redis: RedisClient, key: string): Promise<T[]> {
  return (await redis.lrangeBuffer(key, 0, -1)).map((entry) => unpackJson<T>(entry));
}
