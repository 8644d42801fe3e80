import { Counter, Gauge, type Registry } from '../../telemetry/index.js';

/** The sweeper's own metrics; the ends it causes are counted by the lifecycle (`runs_ended_total`). */
export interface SweeperMetrics {
  readonly active: Gauge;
  readonly passes: Counter;
  readonly reclaimed: Counter;
  readonly deadlineExceeded: Counter;
  readonly staleApprovals: Counter;
  readonly requeued: Counter;
}

export function createSweeperMetrics(registry: Registry): SweeperMetrics {
  const registers = [registry];
  return {
    active: new Gauge({
      name: 'leasehold_sweeper_active',
      help: '1 while this process holds the sweeper lock.',
      registers,
    }),
    passes: new Counter({
      name: 'leasehold_sweeper_passes_total',
      help: 'Sweeper passes run while holding the lock.',
      registers,
    }),
    reclaimed: new Counter({
      name: 'leasehold_runs_reclaimed_total',
      help: 'Runs failed `reclaimed` because their workers stalled past the retry limit.',
      registers,
    }),
    deadlineExceeded: new Counter({
      name: 'leasehold_runs_deadline_exceeded_total',
      help: 'Runs failed `deadline_exceeded` by the sweeper: past their deadline without reaching their own check.',
      registers,
    }),
    staleApprovals: new Counter({
      name: 'leasehold_approvals_stale_expired_total',
      help: 'Pending approvals expired by the sweeper because their run was no longer parked on them.',
      registers,
    }),
    requeued: new Counter({
      name: 'leasehold_runs_requeued_total',
      help: 'Queued runs whose job was missing (their enqueuer died before adding it), enqueued by the sweeper.',
      registers,
    }),
  };
}
