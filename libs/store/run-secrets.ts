import { type DeclaredSecretName, declaredSecretsSchema } from '../contracts/index.js';
import type { RedisClient } from './redis-client.js';
import { RunKeys, type RunStoreContext } from './run-keys.js';

/**
 * The names and origins of a run's declared secrets (DESIGN §12), as submission stored them; empty
 * for a run without any. A record this version cannot read is treated as none named: the model is
 * then told of none, and a fill naming one is refused by the browser worker.
 */
export async function readDeclaredSecrets(
  context: RunStoreContext,
  runId: string,
): Promise<DeclaredSecretName[]> {
  const raw = await context.redis.hget(context.keys.secrets(runId), 'declared');
  if (!raw) return [];
  try {
    const parsed = declaredSecretsSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : [];
  } catch {
    return [];
  }
}

/**
 * The browser worker's read of a run's sealed secrets (DESIGN §12): the blob as submission stored
 * it, opened by the worker with the seal key; undefined for a run without any.
 */
export async function readSealedRunSecrets(
  redis: RedisClient,
  prefix: string,
  runId: string,
): Promise<string | undefined> {
  return (await redis.hget(new RunKeys(prefix).secrets(runId), 'sealed')) ?? undefined;
}
