import { enqueueExecution, type RunsQueue } from '../../queues/index.js';
import { createWebhooksQueue } from '../../queues/webhooks.js';
import {
  BrowserWorkerRegistry,
  FollowUpIndex,
  ProfileTurns,
  RedisLeaseStore,
  type RunStore,
} from '../store/index.js';
import type { RedisClient } from '../store/redis-client.js';
import { WebhookStore } from '../store/webhooks.js';
import type { RunEndFigures } from '../telemetry/index.js';
import { WebhookTeller } from '../webhooks/teller.js';
import type { LeaseReleaseDeps } from './lease-release.js';
import { RunLifecycle } from './run-lifecycle.js';

export interface FleetLifecycleOptions {
  redis: RedisClient;
  /** The deployment's key prefix (`lh:`). */
  keyPrefix: string;
  store: RunStore;
  queue: RunsQueue;
  /** The data plane's token; without it no lease is released here (browser tools off). */
  dataPlaneToken: string | undefined;
  runEnded(end: RunEndFigures): void;
  onError(runId: string, error: unknown, what: string): void;
}

/**
 * The one run lifecycle of a fleet role, built the same way by the API, the run
 * workers and the sweeper: its runs enqueued on the runs queue, leases released on the data
 * plane, profiles' lines and the follow-up index in the same Redis; the tenants' webhooks told
 * through the webhooks queue beside the runs queue.
 */
export function fleetLifecycle(options: FleetLifecycleOptions): RunLifecycle {
  const { redis, keyPrefix } = options;
  const release: LeaseReleaseDeps | undefined = options.dataPlaneToken
    ? {
        leases: new RedisLeaseStore(redis, keyPrefix),
        workers: new BrowserWorkerRegistry(redis, keyPrefix),
        dataPlaneToken: options.dataPlaneToken,
      }
    : undefined;
  return new RunLifecycle({
    store: options.store,
    turns: new ProfileTurns(redis, keyPrefix),
    followUps: new FollowUpIndex(redis, keyPrefix),
    enqueue: (run) => enqueueExecution(options.queue, run),
    release,
    webhooks: new WebhookTeller({
      hooks: new WebhookStore(redis, keyPrefix),
      // Same connection and prefix as the runs queue; it holds no timer of its own to close.
      queue: createWebhooksQueue(redis, options.queue.opts.prefix ?? 'bull'),
      approvals: options.store,
    }),
    runEnded: options.runEnded,
    onError: options.onError,
  });
}
