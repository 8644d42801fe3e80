import {
  conditionResultSchema,
  type PageArtifacts,
  personStepSchema,
  type RunStep,
  type StepOutcome,
  settleResultSchema,
  strike,
  strikesFor,
} from '../contracts/index.js';
import type { RunPort, StepWrite } from './loop-ports.js';
import type { ModelUsage, ToolCall, ToolOutcome } from './model.js';
import { SECRET_MARKER } from './secret-args.js';

type ToolStep = NonNullable<RunStep['tool']>;

/** A tool outcome as a step tells it: `ok`, or its stable code and message. */
export function stepOutcomeOf(outcome: ToolOutcome): StepOutcome {
  return outcome.ok
    ? { ok: true, code: null, message: outcome.note ?? null }
    : { ok: false, code: outcome.code, message: outcome.message };
}

/**
 * What a step shows of the page a call answered with: how it settled, its postcondition, its url
 * and title — as the model saw them in the observation. Each is kept only when it has the
 * contract's shape, so a tool of another kind never makes a step unreadable.
 */
function pageDetails(
  outcome: ToolOutcome,
  typedSecrets: () => readonly string[],
): Pick<ToolStep, 'settle' | 'postcondition' | 'page'> {
  // A failed navigation that left a page (navigation_failed) shows it as a successful one does.
  const observation = (outcome.result as { observation?: Record<string, unknown> } | null | undefined)
    ?.observation;
  if (!observation || typeof observation !== 'object')
    return { settle: null, postcondition: null, page: null };
  const settle = settleResultSchema.safeParse(observation.settle);
  const condition = conditionResultSchema.safeParse(observation.condition);
  const { url, title } = observation;
  if (typeof url !== 'string' || typeof title !== 'string')
    return {
      settle: settle.success ? settle.data : null,
      postcondition: condition.success ? condition.data : null,
      page: null,
    };
  // A password the model typed itself may be echoed by the site in its URL (a GET form) or title:
  // the step, kept for the retention and shown on the run page, has it struck as its arguments do.
  const strikes = strikesFor(typedSecrets().map((value) => ({ value, marker: SECRET_MARKER })));
  return {
    settle: settle.success ? settle.data : null,
    postcondition: condition.success ? condition.data : null,
    page: { url: strike(url, strikes), title: strike(title, strikes) },
  };
}

/** The takeover a `browser.request_person` call's answer accounts for, when it has one. */
function personDetails(outcome: ToolOutcome | null): ToolStep['person'] {
  if (!outcome?.ok) return null;
  const person = (outcome.result as { person?: unknown } | null | undefined)?.person;
  const parsed = personStepSchema.safeParse(person);
  return parsed.success ? parsed.data : null;
}

/**
 * The step record of one tool call, written through the run port as the call goes:
 * `started` when it is about to run, `waiting_approval` once parked, `ended` with its outcome. The
 * arguments are the RECORDED call's — the transcript's, where a secret reads `[secret]` — never the
 * dispatched one's.
 */
export class ToolStepWriter {
  readonly #startedAtMs: number;
  #approvalId: string | null = null;

  constructor(
    private readonly run: RunPort,
    private readonly clock: () => number,
    private readonly turn: number,
    private readonly index: number,
    private readonly recorded: ToolCall,
    private readonly invocationId: string,
    /** The values the run's model typed as secrets so far, struck from the page the step keeps. */
    private readonly typedSecrets: () => readonly string[] = () => [],
    /** The element an act acts on, as the observation the model saw named it; null for others. */
    private readonly target: () => ToolStep['target'] = () => null,
  ) {
    this.#startedAtMs = clock();
  }

  /** The act's element; a value the model typed as a secret, should its name echo one, struck. */
  #struckTarget(): ToolStep['target'] {
    const target = this.target();
    if (!target) return null;
    const strikes = strikesFor(this.typedSecrets().map((value) => ({ value, marker: SECRET_MARKER })));
    return { role: target.role, name: strike(target.name, strikes) };
  }

  #tool(outcome: ToolOutcome | null, artifacts: PageArtifacts | undefined): ToolStep {
    return {
      name: this.recorded.name,
      invocation_id: this.invocationId,
      arguments: this.recorded.args as ToolStep['arguments'],
      outcome: outcome ? stepOutcomeOf(outcome) : null,
      ...(outcome
        ? pageDetails(outcome, this.typedSecrets)
        : { settle: null, postcondition: null, page: null }),
      target: this.#struckTarget(),
      screenshot: artifacts?.screenshot ?? null,
      // Bounded, query-free and struck by the browser worker (pageLogSchema); kept as it came.
      page_log: artifacts?.page_log ?? null,
      // Where the screenshot is, the browser worker notes apart (it is taken after the answer).
      screenshot_status: null,
      approval_id: this.#approvalId,
      person: personDetails(outcome),
      downloads: artifacts?.downloads ?? [],
    };
  }

  #write(status: RunStep['status'], tool: ToolStep, durationMs: number | null, onlyIfAbsent = false) {
    const endedAtMs = status === 'ended' ? this.clock() : null;
    return (
      this.run.recordStep?.({
        kind: 'tool',
        turn: this.turn,
        index: this.index,
        status,
        started_at_ms: this.#startedAtMs,
        ended_at_ms: endedAtMs,
        duration_ms: durationMs,
        model: null,
        tool,
        ...(onlyIfAbsent ? { onlyIfAbsent } : {}),
      }) ?? Promise.resolve()
    );
  }

  /** The approval the call waits on or was decided by; kept on every later write of the step. */
  decidedBy(approvalId: string | undefined): this {
    if (approvalId) this.#approvalId = approvalId;
    return this;
  }

  /** `started`, only when the step is not recorded yet (sent beside the ledger's start). */
  startedIfNew(): Promise<void> {
    return this.#write('started', this.#tool(null, undefined), null, true);
  }

  /** `started` again: a call let through by its approval runs now. */
  started(): Promise<void> {
    return this.#write('started', this.#tool(null, undefined), null);
  }

  waitingApproval(approvalId: string): Promise<void> {
    this.#approvalId = approvalId;
    return this.#write('waiting_approval', this.#tool(null, undefined), null);
  }

  /** `ended` with the outcome; `durationMs` is the call's own time, null for a call answered without running. */
  ended(outcome: ToolOutcome, durationMs: number | null, artifacts?: PageArtifacts): Promise<void> {
    return this.#write('ended', this.#tool(outcome, artifacts), durationMs);
  }
}

export const OK_STEP: StepOutcome = { ok: true, code: null, message: null };
const NO_USAGE: ModelUsage = { inputTokens: 0, cachedInputTokens: 0, outputTokens: 0 };

/**
 * The step record of one model turn: `started` as the call goes out, `ended` with its
 * usage, cost and the calls it asked for (names only: their arguments are on the tool steps).
 */
export class ModelStepWriter {
  readonly #startedAtMs: number;

  constructor(
    private readonly run: RunPort,
    private readonly clock: () => number,
    private readonly turn: number,
  ) {
    this.#startedAtMs = clock();
  }

  #write(write: Pick<StepWrite, 'status' | 'model' | 'eventOutcome'>): Promise<void> {
    const endedAtMs = write.status === 'ended' ? this.clock() : null;
    return (
      this.run.recordStep?.({
        kind: 'model',
        turn: this.turn,
        index: null,
        started_at_ms: this.#startedAtMs,
        ended_at_ms: endedAtMs,
        duration_ms: endedAtMs === null ? null : endedAtMs - this.#startedAtMs,
        tool: null,
        ...write,
      }) ?? Promise.resolve()
    );
  }

  /**
   * Sends `started` now and answers a handle whose `written()` throws what the write met (a lost
   * run) once awaited: caught at once, so a refusal met while the model call runs is no unhandled
   * rejection.
   */
  started(): { written(): Promise<void> } {
    const failure = this.#write({ status: 'started', model: null }).then(
      () => undefined,
      (error: unknown) => ({ error }),
    );
    return {
      async written() {
        const met = await failure;
        if (met) throw met.error;
      },
    };
  }

  ended(
    usage: ModelUsage | undefined,
    costMicroUsd: number,
    toolCalls: readonly ToolCall[],
    answered: boolean,
    outcome: StepOutcome,
  ): Promise<void> {
    const { inputTokens, cachedInputTokens, outputTokens } = usage ?? NO_USAGE;
    return this.#write({
      status: 'ended',
      model: {
        input_tokens: inputTokens,
        cached_input_tokens: cachedInputTokens,
        output_tokens: outputTokens,
        cost_micro_usd: costMicroUsd,
        tool_calls: toolCalls.map(({ id, name }) => ({ id, name })),
        answered,
      },
      eventOutcome: outcome,
    });
  }
}
