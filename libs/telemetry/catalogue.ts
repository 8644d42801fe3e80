/**
 * Every Leasehold metric, in one place: its name, kind, labels and help. The metric
 * definitions are built from these entries (`Counter({...METRICS.runsEnded, registers})`), the
 * README's catalogue lists them, and the Grafana dashboard and alert rules query them by these
 * names. Labels stay bounded: no run, lease, session or tenant ids.
 *
 * Units are base units (seconds, US dollars); counters end in `_total`, nothing else does.
 */
export interface MetricEntry {
  readonly name: string;
  readonly type: 'counter' | 'gauge' | 'histogram';
  readonly help: string;
  readonly labelNames?: readonly string[];
  readonly buckets?: readonly number[];
  /** Which processes serve it (`fleet` serves every one). */
  readonly roles: readonly Role[];
}

export type Role = 'api' | 'run-worker' | 'browser-worker' | 'sweeper';

const ALL: readonly Role[] = ['api', 'run-worker', 'browser-worker', 'sweeper'];
/** Waits measured in seconds that run from a fraction of a second to an hour. */
const WAIT_BUCKETS = [0.1, 0.5, 1, 5, 15, 30, 60, 300, 900, 3600] as const;

export const METRICS = {
  // Queues and runs.
  queueJobs: {
    name: 'leasehold_queue_jobs',
    type: 'gauge',
    help: 'Jobs in each BullMQ queue by state, read at scrape time (waiting includes prioritised).',
    labelNames: ['queue', 'state'],
    roles: ['api'],
  },
  runQueueWait: {
    name: 'leasehold_run_queue_wait_seconds',
    type: 'histogram',
    help: 'Time a run waited queued (submitted, resumed, retried or handed back) until an execution claimed it; a run that waited its turn for its profile counts from its wake.',
    buckets: WAIT_BUCKETS,
    roles: ['run-worker'],
  },
  runDuration: {
    name: 'leasehold_run_duration_seconds',
    type: 'histogram',
    help: 'Time from a run’s submission to its end, by status.',
    labelNames: ['status'],
    buckets: WAIT_BUCKETS,
    roles: ALL,
  },
  runsEnded: {
    name: 'leasehold_runs_ended_total',
    type: 'counter',
    help: 'Runs ended by this process, by status and error code (each end counted once, by whoever ended it).',
    labelNames: ['status', 'code'],
    roles: ALL,
  },
  scheduleFires: {
    name: 'leasehold_schedule_fires_total',
    type: 'counter',
    help: 'Due times of schedules, by what each came to: fired, skipped_overlap, queued, missed or capped (each due time counted once).',
    labelNames: ['outcome'],
    roles: ['run-worker'],
  },
  runExecutions: {
    name: 'leasehold_run_executions_total',
    type: 'counter',
    help: 'Run executions claimed by this process, by outcome.',
    labelNames: ['outcome'],
    roles: ['run-worker'],
  },
  // The model.
  modelCalls: {
    name: 'leasehold_model_calls_total',
    type: 'counter',
    help: 'Model calls by model (ops/models.yaml names, else other) and result (ok, or the error code).',
    labelNames: ['model', 'result'],
    roles: ['run-worker'],
  },
  modelCallSeconds: {
    name: 'leasehold_model_call_seconds',
    type: 'histogram',
    help: 'Time a model call took, by model.',
    labelNames: ['model'],
    buckets: [0.25, 0.5, 1, 2, 5, 10, 20, 40, 60, 120],
    roles: ['run-worker'],
  },
  modelTokens: {
    name: 'leasehold_model_tokens_total',
    type: 'counter',
    help: 'Model tokens by model and kind (input uncached, cached_input, output: the three add up to every token).',
    labelNames: ['model', 'kind'],
    roles: ['run-worker'],
  },
  modelCost: {
    name: 'leasehold_model_cost_usd_total',
    type: 'counter',
    help: 'Model cost in US dollars by model, priced by ops/models.yaml.',
    labelNames: ['model'],
    roles: ['run-worker'],
  },
  // Approvals.
  approvalWait: {
    name: 'leasehold_approval_wait_seconds',
    type: 'histogram',
    help: 'Time from an approval’s request to its decision, by decision (approved or denied at the API, expired by the sweeper).',
    labelNames: ['decision'],
    buckets: WAIT_BUCKETS,
    roles: ['api', 'sweeper'],
  },
  // A person on a run's page.
  personTakeovers: {
    name: 'leasehold_person_takeovers_total',
    type: 'counter',
    help: 'Takeovers of a run’s page by its principal, by the run’s status when asked (parked: the page handed over at once; running: at the run’s next safe point).',
    labelNames: ['run_status'],
    roles: ['api'],
  },
  personTakeoverDuration: {
    name: 'leasehold_person_takeover_seconds',
    type: 'histogram',
    help: 'How long a person held a run’s page, by how it ended (handed_back by the person, time_limit at the sweeper).',
    labelNames: ['ended'],
    buckets: WAIT_BUCKETS,
    roles: ['api', 'sweeper'],
  },
  personRequests: {
    name: 'leasehold_person_requests_total',
    type: 'counter',
    help: 'Runs’ requests for a person (browser.request_person), by how they ended: taken_over, timeout (the run failed person_timeout), approved or denied without a takeover.',
    labelNames: ['outcome'],
    roles: ['api', 'sweeper'],
  },
  // HTTP, both servers (the REST API and the data plane), and the run worker's and sweeper's ops servers.
  httpRequests: {
    name: 'leasehold_http_requests_total',
    type: 'counter',
    help: 'HTTP requests answered, by server (api, data_plane, ops), method, route template and status.',
    labelNames: ['server', 'method', 'route', 'status'],
    roles: ALL,
  },
  httpRequestSeconds: {
    name: 'leasehold_http_request_duration_seconds',
    type: 'histogram',
    help: 'Time to answer an HTTP request, by server, method and route template.',
    labelNames: ['server', 'method', 'route'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    roles: ALL,
  },
  // Leases and pages (the browser worker).
  leasesLive: {
    name: 'leasehold_leases_live',
    type: 'gauge',
    help: 'Leases whose pages this browser worker holds.',
    roles: ['browser-worker'],
  },
  contextsOpen: {
    name: 'leasehold_browser_contexts_open',
    type: 'gauge',
    help: 'Browser contexts open in this browser worker.',
    roles: ['browser-worker'],
  },
  leaseOperations: {
    name: 'leasehold_lease_operations_total',
    type: 'counter',
    help: 'Lease operations by kind (acquire, renew, close) and result.',
    labelNames: ['op', 'result'],
    roles: ['browser-worker'],
  },
  leaseAcquireSeconds: {
    name: 'leasehold_lease_acquire_seconds',
    type: 'histogram',
    help: 'Time to answer an acquire, by result (created or reattached).',
    labelNames: ['result'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    roles: ['browser-worker'],
  },
  leaseContexts: {
    name: 'leasehold_lease_contexts_total',
    type: 'counter',
    help: "Browser contexts given to new leases, by source: warm (the worker's warm pool) or cold (made for the acquire).",
    labelNames: ['source'],
    roles: ['browser-worker'],
  },
  leaseExpiryCloses: {
    name: 'leasehold_lease_expiry_closes_total',
    type: 'counter',
    help: 'Leases closed unsealed because they expired.',
    roles: ['browser-worker'],
  },
  leaseSequenceRefusals: {
    name: 'leasehold_lease_sequence_refusals_total',
    type: 'counter',
    help: 'Navigate or act calls refused before dispatch for a sequence that was not the next one.',
    roles: ['browser-worker'],
  },
  sealRefusals: {
    name: 'leasehold_sealed_state_refusals_total',
    type: 'counter',
    help: "Acquires refused because the profile's sealed state did not open here, by code (seal_key_mismatch or profile_unreadable).",
    labelNames: ['code'],
    roles: ['browser-worker'],
  },
  screenshotFailures: {
    name: 'leasehold_screenshot_failures_total',
    type: 'counter',
    help: 'Screenshots after navigate and act, or of approval previews, that could not be captured or stored, by stage.',
    labelNames: ['stage'],
    roles: ['browser-worker'],
  },
  settles: {
    name: 'leasehold_settle_total',
    type: 'counter',
    help: 'Settles after navigate and act, by tool and result (dom_quiet, or bound_expired at the 2 s bound).',
    labelNames: ['tool', 'result'],
    roles: ['browser-worker'],
  },
  // ADR-0159: a settle takes at least the 0.3 s quiet window and at most the 2 s bound.
  settleSeconds: {
    name: 'leasehold_settle_seconds',
    type: 'histogram',
    help: 'Time from a navigate or act to its settled page, by tool.',
    labelNames: ['tool'],
    buckets: [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 1.5, 2, 3],
    roles: ['browser-worker'],
  },
  // The run worker's lease upkeep (ADR-0127 d6).
  upkeepPasses: {
    name: 'leasehold_lease_upkeep_passes_total',
    type: 'counter',
    help: 'Lease upkeep passes run by this process.',
    roles: ['run-worker'],
  },
  upkeepPassSeconds: {
    name: 'leasehold_lease_upkeep_pass_seconds',
    type: 'histogram',
    help: 'Time one lease upkeep pass took.',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    roles: ['run-worker'],
  },
  upkeepLeases: {
    name: 'leasehold_lease_upkeep_leases_total',
    type: 'counter',
    help: 'Leases the upkeep renewed, closed (their run was done with the page) or failed to reach, by action.',
    labelNames: ['action'],
    roles: ['run-worker'],
  },
  // The sweeper.
  sweeperActive: {
    name: 'leasehold_sweeper_active',
    type: 'gauge',
    help: '1 while this process holds the sweeper lock.',
    roles: ['sweeper'],
  },
  sweeperPasses: {
    name: 'leasehold_sweeper_passes_total',
    type: 'counter',
    help: 'Sweeper passes run while holding the lock.',
    roles: ['sweeper'],
  },
  runsReclaimed: {
    name: 'leasehold_runs_reclaimed_total',
    type: 'counter',
    help: 'Runs failed `reclaimed` because their workers stalled past the retry limit.',
    roles: ['sweeper'],
  },
  runsDeadlineExceeded: {
    name: 'leasehold_runs_deadline_exceeded_total',
    type: 'counter',
    help: 'Runs failed `deadline_exceeded` by the sweeper: past their deadline without reaching their own check.',
    roles: ['sweeper'],
  },
  approvalsStaleExpired: {
    name: 'leasehold_approvals_stale_expired_total',
    type: 'counter',
    help: 'Pending approvals expired by the sweeper because their run was no longer parked on them.',
    roles: ['sweeper'],
  },
  runsRequeued: {
    name: 'leasehold_runs_requeued_total',
    type: 'counter',
    help: 'Queued runs whose job was missing (their enqueuer died before adding it), enqueued by the sweeper.',
    roles: ['sweeper'],
  },
} as const satisfies Record<string, MetricEntry>;

export type MetricKey = keyof typeof METRICS;

/**
 * prom-client's standard process and Node.js series keep their standard names (`process_*`,
 * `nodejs_*`, no prefix) so stock dashboards find them, except these three gauges, which end in
 * `_total` (promtool refuses a gauge so named); their per-type series (`nodejs_active_handles`, …)
 * stay, and a sum of them is the total.
 */
export const DROPPED_DEFAULT_METRICS = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
] as const;
