import { type RunFile, runFileSchema } from '../contracts/index.js';
import type { RedisClient } from './redis-client.js';
import { RunKeys } from './run-keys.js';
import { type ScriptCommands, withScripts } from './scripts.js';

/**
 * A run's downloads (DESIGN §12): the browser worker that saw a lease's page download a file
 * counts its bytes against the run's limit, writes them to the artifact store and notes the
 * record here; the files route and the run page read it. One hash per run, in the run's slot,
 * expiring with the run (`noteRunFile-2.lua`).
 */
export class RunFileNotes {
  readonly #redis: RedisClient & ScriptCommands;
  readonly #keys: RunKeys;

  constructor(redis: RedisClient, prefix: string) {
    this.#redis = withScripts(redis);
    this.#keys = new RunKeys(prefix);
  }

  /**
   * Counts `sizeBytes` against the run's `runLimitBytes`: false when the run's files would pass
   * it (nothing is counted then). A run with no record keeps nothing.
   */
  async reserve(runId: string, fileId: string, sizeBytes: number, runLimitBytes: number): Promise<boolean> {
    const answer = await this.#redis.noteRunFile(
      this.#keys.run(runId),
      this.#keys.files(runId),
      'reserve',
      fileId,
      sizeBytes,
      runLimitBytes,
    );
    return answer === 'ok';
  }

  /** The bytes the run's stored downloads keep so far. */
  async keptBytes(runId: string): Promise<number> {
    return Number(await this.#redis.hget(this.#keys.files(runId), 'bytes')) || 0;
  }

  async note(runId: string, file: RunFile): Promise<void> {
    await this.#redis.noteRunFile(
      this.#keys.run(runId),
      this.#keys.files(runId),
      'note',
      file.id,
      JSON.stringify(file),
    );
  }
}

/** A run's downloads, oldest first (a hash read whole: a run keeps a few hundred at most). */
export async function readRunFiles(redis: RedisClient, keys: RunKeys, runId: string): Promise<RunFile[]> {
  const fields = await redis.hgetall(keys.files(runId));
  const files: RunFile[] = [];
  for (const [field, stored] of Object.entries(fields ?? {})) {
    if (!field.startsWith('fil_')) continue;
    const parsed = runFileSchema.safeParse(JSON.parse(stored));
    if (parsed.success) files.push(parsed.data);
  }
  return files.sort((a, b) => a.created_at_ms - b.created_at_ms || a.id.localeCompare(b.id));
}
