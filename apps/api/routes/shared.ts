import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ArtifactStore } from '../../../libs/artifacts/index.js';
import type { Config } from '../../../libs/config/index.js';
import { recordIdSchema } from '../../../libs/contracts/index.js';
import type { EgressGuard } from '../../../libs/egress/index.js';
import type { RunLifecycle } from '../../../libs/runtime/index.js';
import type { RunPageControl } from '../../../libs/runtime/person-page-control.js';
import type {
  BrowserWorkerRegistry,
  ProfileSignIns,
  ProfileTurns,
  RedisLeaseStore,
  RunStore,
  ScheduleStore,
  SubmitRun,
} from '../../../libs/store/index.js';
import type { WebhookStore } from '../../../libs/store/webhooks.js';
import type { Metrics, RunEventStreams } from '../../../libs/telemetry/index.js';
import type { SchedulesQueue } from '../../../queues/schedules.js';
import type { DefaultAgents } from '../default-agent.js';
import type { LiveDependencies } from '../live-relay.js';

/** What the profile sign-in routes need beside the other v1 routes' dependencies. */
export interface ProfileSignInDependencies {
  records: ProfileSignIns;
  turns: ProfileTurns;
  workers: BrowserWorkerRegistry;
  /** A sign-in's lease past its page's last heartbeat. */
  leaseMs: number;
}

export interface V1Dependencies {
  config: Config;
  /** DESIGN §12: judges a new profile's literal origins (the fleet's own ports refused too). */
  egress: EgressGuard;
  store: RunStore;
  profiles: RedisLeaseStore;
  /** The tenants' default agents (ADR-0130 d2). */
  defaultAgents: DefaultAgents;
  /** Open event streams: one subscriber per process, a slot per stream per key. */
  eventStreams: RunEventStreams;
  /**
   * Every consequence of a transition a route causes (enqueue, lease release, child
   * cancel, parent resume, the end counted) is carried out here, never derived by a route.
   */
  lifecycle: RunLifecycle;
  /**
   * Queues a new run's first job on the batch that stores it (`SubmitRun.enqueueWith`);
   * absent, the job is added by the lifecycle after the run is stored.
   */
  addFirstJob?: SubmitRun['enqueueWith'];
  /** The tenants' webhooks and their delivery logs. */
  webhooks: WebhookStore;
  /** Where runs' screenshots are read from (the same store the browser workers write). */
  artifacts: ArtifactStore;
  /** Schedules: their records, and the queue whose job schedulers fire them. */
  schedules: { store: ScheduleStore; queue: SchedulesQueue };
  /** A person on a run's page: the live view's relay; absent, the live routes answer 409. */
  live?: LiveDependencies;
  /** Profiles signed in by hand; absent, those routes answer 409. */
  profileSignIns?: ProfileSignInDependencies;
  /** Where a decided approval's wait is observed; absent, it is not. */
  metrics?: Pick<Metrics, 'approvalWaited' | 'of'>;
  /** A run's page handed to its principal and back; absent, takeovers are refused. */
  pageControl?: RunPageControl;
}

/** A route registrar's view of the server: schemas are zod, parsed on arrival. */
export function typed(root: FastifyInstance) {
  return root.withTypeProvider<ZodTypeProvider>();
}

export const idParams = z.object({ id: recordIdSchema });

export const idempotencyHeader = z.object({
  'idempotency-key': z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,128}$/)
    .optional(),
});
