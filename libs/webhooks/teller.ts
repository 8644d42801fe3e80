import {
  DEFAULT_WEBHOOK_RETRY,
  type WebhookRetryPolicy,
  type WebhooksQueue,
  webhookJobId,
  webhookJobOptions,
} from '../../queues/webhooks.js';
import {
  type ApprovalView,
  REQUEST_PERSON_TOOL,
  type RunView,
  type WebhookEvent,
} from '../contracts/index.js';
import type { WebhookStore } from '../store/webhooks.js';

export interface WebhookTellerDeps {
  hooks: Pick<WebhookStore, 'records'>;
  queue: WebhooksQueue;
  /** A run's approvals (the run store fits). */
  approvals: { listApprovals(runId: string): Promise<ApprovalView[]> };
  retry?: WebhookRetryPolicy;
}

/**
 * Turns what the lifecycle found into deliveries: one job per webhook subscribed when the event
 * happened and event, its id made of both, so the lifecycle may tell an event as often as its follow-ups run
 * (at least once) and each webhook is told once. An event's body is made from the records alone
 * (never the clock), so whichever telling adds the job, the body is the same.
 */
export class WebhookTeller {
  readonly #deps: WebhookTellerDeps;

  constructor(deps: WebhookTellerDeps) {
    this.#deps = deps;
  }

  /** `run.ended`: one per run end — its id names the run, the attempt that ended and how. */
  async runEnded(run: RunView): Promise<void> {
    await this.#tell(run.tenant, [
      {
        id: `${run.id}-a${run.attempt}-${run.status}`,
        type: 'run.ended',
        tenant: run.tenant,
        run_id: run.id,
        status: run.status,
        error_code: run.error?.code ?? null,
        approval_id: null,
        card: null,
        at_ms: run.ended_at_ms ?? run.updated_at_ms,
        link: `/runs/${run.id}`,
      },
    ]);
  }

  /**
   * `approval.requested`: one per pending approval of a parked run (its id is the approval's);
   * `person.requested` for a run's request for a person (`browser.request_person`). A takeover's
   * own approval tells nobody: its person is already there.
   */
  async runParked(run: RunView): Promise<void> {
    const pending = (await this.#deps.approvals.listApprovals(run.id)).filter(
      (approval) =>
        approval.status === 'pending' &&
        (approval.kind === 'action' || approval.tool === REQUEST_PERSON_TOOL),
    );
    await this.#tell(
      run.tenant,
      pending.map((approval) => ({
        id: approval.id,
        type: approval.kind === 'person' ? 'person.requested' : 'approval.requested',
        tenant: run.tenant,
        run_id: run.id,
        status: run.status,
        error_code: null,
        approval_id: approval.id,
        card: approval.card,
        at_ms: approval.created_at_ms,
        link: `/runs/${run.id}`,
      })),
    );
  }

  async #tell(tenant: string, events: WebhookEvent[]): Promise<void> {
    if (events.length === 0) return;
    const hooks = await this.#deps.hooks.records(tenant);
    const options = webhookJobOptions(this.#deps.retry ?? DEFAULT_WEBHOOK_RETRY);
    // A webhook hears what happened from its registration on. A follow-up may tell an event late
    // (run again after a crash, or after the sweeper's look), by then to a webhook made since.
    const jobs = hooks.flatMap((hook) =>
      events
        .filter((event) => hook.events.includes(event.type) && event.at_ms >= hook.created_at_ms)
        .map((event) => ({
          name: event.type,
          data: { tenant, webhookId: hook.id, event },
          opts: { ...options, jobId: webhookJobId(hook.id, event.id) },
        })),
    );
    if (jobs.length > 0) await this.#deps.queue.addBulk(jobs);
  }
}
