import { type RunStatus, runHasEnded } from '../contracts/index.js';
import type { RunStoreContext } from './run-keys.js';
import { slotBatch } from './slot-batch.js';

/** Records read per round trip while looking for an active run. */
const READ_BATCH = 200;

/** Which runs count: the tenant's, of one session or bound to one profile. */
export type ActiveRunQuery = { tenant: string } & ({ sessionId: string } | { profileId: string });

/**
 * A run of the query that has not ended (queued, running or waiting), or undefined: what keeps a
 * session or a profile from being deleted. A session's runs are its own index; a profile's are
 * found among the runs not yet known to have ended (the sweeper's deadline index), so the read is
 * bounded by the deployment's active runs, never by a tenant's history.
 */
export async function activeRunOf(
  context: RunStoreContext,
  query: ActiveRunQuery,
): Promise<string | undefined> {
  const { redis, keys } = context;
  const ids =
    'sessionId' in query
      ? await redis.zrange(keys.sessionRuns(query.sessionId), 0, -1)
      : await redis.zrange(keys.runDeadlines(), 0, -1);
  for (let start = 0; start < ids.length; start += READ_BATCH) {
    const batch = ids.slice(start, start + READ_BATCH);
    const pipeline = slotBatch(redis);
    for (const id of batch) pipeline.hmget(keys.run(id), 'tenant', 'status', 'session_id', 'profile_id');
    const replies = (await pipeline.exec()) ?? [];
    for (const [index, id] of batch.entries()) {
      const [tenant, status, sessionId, profileId] = (replies[index]?.[1] ?? []) as Array<string | null>;
      if (tenant !== query.tenant || !status || runHasEnded(status as RunStatus)) continue;
      if ('sessionId' in query ? sessionId === query.sessionId : profileId === query.profileId) return id;
    }
  }
  return undefined;
}
