import { createHmac } from 'node:crypto';
import type { Logger } from 'pino';
import type { Config } from '../../libs/config/index.js';
import { type RunView, runHasEnded } from '../../libs/contracts/index.js';
import { BOUNDED_ACQUIRE_RETRY, BrowserLeaseProvider } from '../../libs/provider/index.js';
import {
  argumentSealer,
  BROWSER_TOOL_NAMES_REQUIRED,
  BrowserToolExecutor,
  DELEGATE_TOOL_NAME,
  type ExecutionEnd,
  type Invocation,
  type InvocationState,
  LoopBreaker,
  leaseStillNeeded,
  type Model,
  ModelError,
  type ModelUsage,
  modelPrice,
  OpenAiCompatibleModel,
  type RunLoopOptions,
  type RunPort,
  runExecution,
  ScriptedModel,
  scriptSchema,
  type ToolOutcome,
  type ToolPolicy,
  type TranscriptEntry,
} from '../../libs/runtime/index.js';
import {
  AgentVersionCache,
  type BrowserWorkerRegistry,
  type RedisLeaseStore,
  type RunStore,
} from '../../libs/store/index.js';
import { type RunTranscripts, TranscriptWriteRefused } from '../../libs/store/run-transcript.js';
import type { RunsQueue } from '../../queues/index.js';
import { delegateToChild, resumeParent } from './children.js';
import { RunLost, refusedUnlessOk } from './run-lost.js';

export { RunLost } from './run-lost.js';

/** Tools that need the owner's approval unless a live task grant covers them (DESIGN §3). */
const APPROVAL_TOOLS = new Set(['browser.act']);

export interface ExecutionDeps {
  config: Config;
  store: RunStore;
  transcripts: RunTranscripts;
  registry: BrowserWorkerRegistry;
  /** Profiles, for the origins a bound run's model is told it may visit. */
  profiles: Pick<RedisLeaseStore, 'allowedOrigins'>;
  /** Where children and resumed parents are enqueued. */
  queue: RunsQueue;
  logger: Logger;
  /** Runs whose cancel this process heard on the store's pub/sub channel (a fast path before the store's flag). */
  cancelsHeard?: ReadonlySet<string>;
  /**
   * Test-only fault hook (issue 12): called with a point's name before each of the execution's
   * awaits on the store, so a test can make any of them throw and show the run is not stranded.
   */
  faults?: (point: string) => void | Promise<void>;
}

/** The run as the loop sees it, over the run store; every write carries this worker's owner token. */
class StoreRunPort implements RunPort {
  #current: RunView;
  #unwrittenInput: TranscriptEntry | undefined;
  #checkedOnce = false;

  constructor(
    private readonly deps: ExecutionDeps,
    private readonly run: RunView,
    private readonly ownerToken: string,
  ) {
    this.#current = run;
  }

  get runId(): string {
    return this.run.id;
  }

  /** As the run store names ledger entries: a retried run's calls never meet the first attempt's. */
  invocationId(step: number, index: number): string {
    return `${this.run.id}-a${this.run.attempt}-s${step}-i${index}`;
  }

  async loadTranscript(): Promise<TranscriptEntry[]> {
    await this.deps.faults?.('transcript.load');
    const entries = await this.deps.transcripts.load<TranscriptEntry>(this.run.id);
    if (entries.length > 0) return entries;
    const input = this.run.input as { text?: string } | string;
    const first: TranscriptEntry = {
      kind: 'input',
      text: typeof input === 'string' ? input : (input.text ?? ''),
    };
    // Written with the first model turn, in the same round trip: a run that crashes before it
    // starts again from its input anyway.
    this.#unwrittenInput = first;
    return [first];
  }

  async appendTranscript(entry: TranscriptEntry): Promise<void> {
    const entries = this.#unwrittenInput ? [this.#unwrittenInput, entry] : [entry];
    await this.deps.faults?.('transcript.append');
    try {
      await this.deps.transcripts.append(this.run.id, this.ownerToken, ...entries);
    } catch (error) {
      // Issue 12: refused as not the owner, the run is another worker's now: lost, not a fault.
      if (error instanceof TranscriptWriteRefused && error.code === 'not_owner')
        throw new RunLost(`transcript: ${error.message}`);
      throw error;
    }
    this.#unwrittenInput = undefined;
  }

  /** Usage as this owner last wrote it: only the owner adds to it, so no read is needed. */
  async usage() {
    const { usage } = this.#current;
    return {
      steps: usage.steps,
      modelCalls: usage.model_calls,
      toolCalls: usage.tool_calls,
      costMicroUsd: usage.cost_micro_usd,
    };
  }

  async #addUsage(delta: Parameters<RunStore['addUsage']>[2]): Promise<void> {
    await this.deps.faults?.('usage.add');
    const added = await this.deps.store.addUsage(this.run.id, this.ownerToken, delta);
    if (!added.ok) throw new RunLost(`usage: ${added.message}`);
    this.#current = added.run;
  }

  recordModelCall(_usage: ModelUsage, costMicroUsd: number): Promise<void> {
    return this.#addUsage({ steps: 1, model_calls: 1, cost_micro_usd: costMicroUsd });
  }

  async loadBreakerState(): Promise<unknown> {
    await this.deps.faults?.('loop_state.load');
    return this.deps.store.loadLoopState(this.run.id);
  }

  async saveBreakerState(state: unknown): Promise<void> {
    await this.deps.faults?.('loop_state.save');
    refusedUnlessOk(await this.deps.store.saveLoopState(this.run.id, this.ownerToken, state), 'loop state');
  }

  async cancelRequested(): Promise<boolean> {
    await this.deps.faults?.('cancel.check');
    if (this.deps.cancelsHeard?.has(this.run.id)) return true;
    // The first check comes right after the claim, whose record carries the flag: no read needed.
    // A cancel asked since then was published, and this process heard it (above).
    if (!this.#checkedOnce) {
      this.#checkedOnce = true;
      return this.run.cancel_requested;
    }
    return this.deps.store.stopRequested(this.run.id);
  }

  async startInvocation(invocation: Invocation): Promise<InvocationState> {
    await this.deps.faults?.('invocation.start');
    const recorded = await this.deps.store.recordInvocation(this.run.id, this.ownerToken, {
      step: invocation.step,
      index: invocation.index,
      tool: invocation.call.name,
      state: 'started',
    });
    refusedUnlessOk(recorded, 'ledger');
    const entry = recorded.entry;
    // An approval is only ever asked for a call already in the ledger: a new one has none.
    if (recorded.code === 'recorded') {
      // The ledger's script counted the tool call; this owner's view of usage follows it.
      const { usage } = this.#current;
      this.#current = { ...this.#current, usage: { ...usage, tool_calls: usage.tool_calls + 1 } };
      return { state: 'new' };
    }
    const approvals = await this.deps.store.listApprovals(this.run.id);
    const approval = approvals.filter((candidate) => candidate.invocation_id === invocation.id).at(-1);
    switch (entry?.state) {
      case 'dispatched':
        return { state: 'dispatched' };
      case 'outcome_unknown':
        return { state: 'outcome_unknown' };
      case 'completed':
        return { state: 'completed', outcome: entry.result as ToolOutcome };
      default:
        break;
    }
    if (approval?.status === 'pending') return { state: 'awaiting_approval', approvalId: approval.id };
    if (approval?.status === 'approved') return { state: 'approved' };
    if (approval?.status === 'denied')
      return { state: 'denied', message: approval.reason ?? 'denied by the owner' };
    return { state: 'started' };
  }

  async markDispatched(invocation: Invocation): Promise<void> {
    await this.deps.faults?.('invocation.dispatch');
    const recorded = await this.deps.store.recordInvocation(this.run.id, this.ownerToken, {
      step: invocation.step,
      index: invocation.index,
      tool: invocation.call.name,
      state: 'dispatched',
    });
    refusedUnlessOk(recorded, 'ledger');
  }

  async completeInvocation(invocation: Invocation, outcome: ToolOutcome): Promise<void> {
    await this.deps.faults?.('invocation.complete');
    const recorded = await this.deps.store.recordInvocation(this.run.id, this.ownerToken, {
      step: invocation.step,
      index: invocation.index,
      tool: invocation.call.name,
      state: !outcome.ok && outcome.code === 'outcome_unknown' ? 'outcome_unknown' : 'completed',
      result: outcome,
    });
    refusedUnlessOk(recorded, 'ledger');
  }

  async markUnverified(invocation: Invocation, error: { code: string; message: string }): Promise<void> {
    const marked = await this.deps.store.markUnverified(this.run.id, this.ownerToken, {
      invocation_id: invocation.id,
      ...error,
    });
    if (!marked.ok) throw new RunLost(`unverified mark: ${marked.message}`);
    this.#current = marked.run;
  }
}

/**
 * What ADR-0130 adds to a run's loop: its model's prices and cost limit (d1), the loop breaker
 * (d7), and in a bound session the required browser tools (d4) and the origins row (d9).
 */
async function budgetOptions(
  deps: ExecutionDeps,
  run: RunView,
  agentModel: string,
): Promise<Partial<RunLoopOptions>> {
  const entry = deps.config.models.models[agentModel];
  const options: Partial<RunLoopOptions> = {
    costLimits: run.limits,
    breaker: new LoopBreaker({ evidenceSecret: evidenceSecret(deps.config, run.id) }),
  };
  if (entry) options.price = modelPrice(entry);
  if (run.browser_profile_id) {
    options.requiredTools = BROWSER_TOOL_NAMES_REQUIRED;
    // The profile's normalised origins only: never its id, a name or a credential.
    const origins = (
      await deps.profiles.allowedOrigins({ tenant: run.tenant, id: run.browser_profile_id })
    ).slice(0, MAX_ORIGINS_RENDERED);
    options.runtimeMetadata = { browser_origins: origins.join(',') };
  }
  return options;
}

/** ADR-0130 d9: at most 16 origins are rendered in the row. */
const MAX_ORIGINS_RENDERED = 16;

/**
 * Keys the breaker's evidence digests: the same for every execution of a run, never stored beside
 * them (derived from the deployment's secret and the run id).
 */
function evidenceSecret(config: Config, runId: string): string {
  const secret = config.secrets.sealKey ?? config.secrets.dataPlaneToken ?? 'leasehold';
  return createHmac('sha256', secret).update(`loop-breaker\n${runId}`).digest('hex');
}

/** Seals secret tool arguments under the deployment's secret (issue 11); without one, memory only. */
function argumentSealing(config: Config, runId: string): Pick<RunLoopOptions, 'argumentSealer'> {
  const secret = config.secrets.sealKey ?? config.secrets.dataPlaneToken;
  return secret ? { argumentSealer: argumentSealer(secret, runId) } : {};
}

/** The run's model: `scripted` from the script it carries, or an `openai-compatible` one from ops/models.yaml. */
function modelFor(config: Config, agentModel: string, run: RunView): Model {
  const entry = config.models.models[agentModel];
  if (agentModel === 'scripted' || entry?.provider === 'scripted') {
    const script = scriptSchema.safeParse(
      (run.input as { script?: unknown }).script ?? { steps: [], answer: '' },
    );
    if (!script.success) throw new ModelError('the run carries no valid script for the scripted model');
    return new ScriptedModel(script.data);
  }
  if (!entry?.base_url) throw new ModelError(`model ${agentModel} is not listed in ops/models.yaml`);
  const apiKey = config.secrets.modelApiKeys[agentModel];
  if (!apiKey)
    throw new ModelError(`model ${agentModel} has no API key: set ${entry.api_key_env ?? 'its api_key_env'}`);
  return new OpenAiCompatibleModel({
    name: agentModel,
    model: entry.api_model ?? agentModel,
    baseUrl: entry.base_url,
    apiKey,
    ...(entry.max_output_tokens !== undefined ? { maxOutputTokens: entry.max_output_tokens } : {}),
    ...(entry.temperature !== undefined ? { temperature: entry.temperature } : {}),
    ...(entry.attempts !== undefined ? { attempts: entry.attempts } : {}),
    ...(entry.timeout_ms !== undefined ? { timeoutMs: entry.timeout_ms } : {}),
  });
}

/**
 * One execution of a claimed run: the loop, then the run's new status, then — only when the run is
 * done with its page (an end, `waiting_user`, `waiting_child`) — its lease sealed and closed. The
 * status is read again after pending approvals are written, so a concurrent approval never reads as
 * an end (ADR-0127 d4).
 */
export async function executeRun(
  deps: ExecutionDeps,
  run: RunView,
  ownerToken: string,
  signal: AbortSignal,
): Promise<ExecutionEnd> {
  await deps.faults?.('agent.load');
  const agent = await agentVersions(deps).get(run.tenant, run.agent_id, run.agent_version);
  const token = deps.config.secrets.dataPlaneToken;
  const provider =
    run.browser_profile_id && token
      ? new BrowserLeaseProvider({
          scope: { tenant: run.tenant, principal: run.principal, run_id: run.id, attempt: run.attempt },
          profileId: run.browser_profile_id,
          findWorker: (profile) => deps.registry.findForProfile(profile),
          token,
          // ADR-0127 d7: another run's lease is sealed and replaced only once that run is done with its page.
          holderNeedsPage: async (holderRunId) =>
            leaseStillNeeded((await deps.store.getRun(holderRunId))?.status),
          // ADR-0177: acquisition alone is retried, three attempts at most, each failure on the run's events.
          acquireRetry: BOUNDED_ACQUIRE_RETRY,
          onAcquireAttempt: async (diagnostic) => {
            refusedUnlessOk(
              await deps.store.appendEvent(run.id, ownerToken, 'tool.acquire_attempt', { ...diagnostic }),
              'event',
            );
          },
        })
      : undefined;
  const tools = new BrowserToolExecutor(provider, run.deadline_at_ms);
  const port = new StoreRunPort(deps, run, ownerToken);
  const policy: ToolPolicy = {
    async needsApproval(invocation: Invocation) {
      if (!APPROVAL_TOOLS.has(invocation.call.name)) return false;
      await deps.faults?.('grant.consume');
      // DESIGN §3: a grant is used once per approved action.
      const use = await deps.store.consumeGrant(run.id, ownerToken, invocation.id);
      return !use.ok;
    },
    async park(invocation) {
      await deps.faults?.('approval.request');
      const { approvalId, transition } = await deps.store.requestApproval(run.id, ownerToken, {
        invocationId: invocation.id,
        tool: invocation.call.name,
        arguments: invocation.call.args,
      });
      refusedUnlessOk(transition, 'park');
      return approvalId;
    },
    ...(agent?.tools.includes(DELEGATE_TOOL_NAME)
      ? {
          delegate: (invocation: Invocation) =>
            delegateToChild(deps, run, ownerToken, invocation, () => closeLease(deps, run, provider)),
        }
      : {}),
  };

  let end: ExecutionEnd;
  try {
    if (!agent) throw new ModelError(`agent version ${run.agent_version} not found`);
    end = await runExecution({
      run: port,
      model: modelFor(deps.config, agent.model, run),
      tools,
      policy,
      limits: {
        maxSteps: run.limits.max_steps,
        maxModelCalls: run.limits.max_model_calls,
        maxToolCalls: run.limits.max_tool_calls,
        reserveModelCalls: run.limits.reserve_model_calls,
        reserveToolCalls: run.limits.reserve_tool_calls,
      },
      deadlineMs: run.deadline_at_ms,
      signal,
      instructions: agent.instructions,
      // Issue 11: a parked call's secret arguments, sealed under the deployment's secret and run id.
      ...argumentSealing(deps.config, run.id),
      ...(await budgetOptions(deps, run, agent.model)),
    });
  } catch (error) {
    if (!(error instanceof ModelError)) throw error;
    end = { kind: 'failed', code: 'model_error', detail: error.message };
  }

  await deps.faults?.('end.record');
  // The run as its own end left it; a park or wait is read again (ADR-0127 d4, below).
  let ended: RunView | undefined;
  switch (end.kind) {
    case 'succeeded':
      ended = finished(
        await deps.store.finishRun(run.id, ownerToken, {
          status: 'succeeded',
          result: { answer: end.answer },
        }),
      );
      break;
    case 'failed':
      ended = finished(
        await deps.store.finishRun(run.id, ownerToken, {
          status: 'failed',
          code: end.code,
          message: end.detail,
          ...(end.step !== undefined ? { step: end.step } : {}),
        }),
      );
      break;
    case 'cancelled': {
      const cancelled = await deps.store.finishRun(run.id, ownerToken, { status: 'cancelled' });
      ended = cancelled.ok ? cancelled.run : undefined;
      break;
    }
    case 'parked':
    case 'waiting_child':
      break;
  }

  await deps.faults?.('end.read');
  // ADR-0127 d4: read the status again, after the approvals were written.
  const after = ended ?? (await deps.store.getRun(run.id));
  const doneWithPage =
    !after ||
    runHasEnded(after.status) ||
    after.status === 'waiting_user' ||
    after.status === 'waiting_child';
  await deps.faults?.('lease.close');
  if (doneWithPage) {
    await closeLease(deps, run, provider);
  } else {
    // The run keeps its page; a lease it stopped trusting must not be there for its resume.
    await provider
      ?.closeRetired({ deadlineMs: Date.now() + 15_000 })
      .catch((error: unknown) =>
        deps.logger.warn(
          { run_id: run.id, err: error },
          'closing a retired lease failed; the next acquire closes it',
        ),
      );
  }
  // A child that ended resumes its waiting parent — after its page is released, so the parent
  // (same profile) finds the page free.
  if (after && runHasEnded(after.status)) await resumeParent(deps, after);
  return end;
}

function finished(transition: Awaited<ReturnType<RunStore['finishRun']>>): RunView {
  refusedUnlessOk(transition, 'finish');
  return transition.run;
}

const caches = new WeakMap<RunStore, AgentVersionCache>();
/** One agent-version cache per store: versions are content-addressed and never change. */
function agentVersions(deps: ExecutionDeps): AgentVersionCache {
  let cache = caches.get(deps.store);
  if (!cache) {
    cache = new AgentVersionCache(deps.store);
    caches.set(deps.store, cache);
  }
  return cache;
}

/** Seals and closes the run's lease, if it holds one; a failure is left to the upkeep. */
async function closeLease(
  deps: ExecutionDeps,
  run: RunView,
  provider: BrowserLeaseProvider | undefined,
): Promise<void> {
  await provider
    ?.close({ seal: true })
    .catch((error: unknown) =>
      deps.logger.warn(
        { run_id: run.id, err: error },
        'lease close at the end of the run failed; the upkeep will close it',
      ),
    );
}
