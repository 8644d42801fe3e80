import type { Logger } from 'pino';
import type { Config } from '../config/index.js';
import type { ModelMetrics } from '../models/index.js';
import type { RunPageControl } from '../runtime/person-page-control.js';
import type { RunLifecycle } from '../runtime/run-lifecycle.js';
import type { BrowserWorkerRegistry, LeaseUpkeepIndex, RedisLeaseStore, RunStore } from '../store/index.js';
import type { McpTurns } from '../store/mcp-turns.js';
import type { RunTranscripts } from '../store/run-transcript.js';
import type { LockGuard } from './lock-guard.js';

/** What one execution of a claimed run works over: the run worker's shared resources. */
export interface ExecutionDeps {
  config: Config;
  store: RunStore;
  transcripts: RunTranscripts;
  registry: BrowserWorkerRegistry;
  /**
   * This run worker's upkeep index (ADR-0127 d6): a lease acquired for a run executed here is kept
   * up by this worker, and a run claimed here brings its lease along. Absent, no lease is indexed.
   */
  upkeep?: { workerId: string; index: Pick<LeaseUpkeepIndex, 'add'> } | undefined;
  /** Profiles, for the origins a bound run's model is told it may visit. */
  profiles: Pick<RedisLeaseStore, 'allowedOrigins'>;
  /**
   * One lifecycle: every consequence of a transition this execution causes (a child
   * enqueued, a parent resumed, an end counted, a lease released) is carried out by it.
   */
  lifecycle: RunLifecycle;
  logger: Logger;
  /** Model calls, call time, tokens and cost by model; absent, the calls are not counted. */
  modelMetrics?: ModelMetrics | undefined;
  /** The channel to the API of runs whose model is an MCP client; absent, such runs fail `model_error`. */
  mcpTurns?: McpTurns;
  /** A run's page handed to a person and back (the data plane's person control); absent, takeovers are dropped. */
  pageControl?: RunPageControl;
  /**
   * Aborted when the worker begins to stop: each execution hands its run back at its next call
   * boundary, and the calls already in flight run on to their answers (or to the stop's bound).
   */
  stopping?: AbortSignal;
  /** Runs whose cancel this process heard on the store's pub/sub channel (a fast path before the store's flag). */
  cancelsHeard?: ReadonlySet<string>;
  /**
   * Test-only fault hook: called with a point's name before each of the execution's
   * awaits on the store, so a test can make any of them throw and show the run is not stranded.
   */
  faults?: (point: string) => void | Promise<void>;
  /** This execution's job lock: no call goes out, and no answer is written, on a lock in doubt. */
  lockGuard?: LockGuard;
}
