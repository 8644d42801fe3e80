import { z } from 'zod';
import {
  actArgsSchema,
  assertNever,
  BROWSER_TOOLS_CONTRACT_VERSION,
  type HandoverAnswer,
  isToolErrorCode,
  navigateArgsSchema,
  observeArgsSchema,
  type PageArtifacts,
  REQUEST_PERSON_TOOL,
  type RunFile,
  requestPersonArgsSchema,
} from '../contracts/index.js';
import {
  BROWSER_TOOL_NAMES,
  type BrowserLeaseProvider,
  type BrowserToolName,
  BrowserWorkerAway,
  type DispatchedEffect,
  executeBrowserTool,
  ProviderError,
} from '../provider/index.js';
import { ExecutionInterrupted, type ToolCallContext, type ToolExecutor, type ToolRun } from './loop.js';
import type { ToolCall, ToolDefinition, ToolOutcome } from './model.js';

/**
 * Each description ends with the contract version, so what reaches the model (the
 * adapters send a description as it is) says which contract its arguments and answers follow.
 */
const CONTRACT_NOTE = ` (browser tools contract ${BROWSER_TOOLS_CONTRACT_VERSION})`;

/** What the step of a call learned applied from its lease says. */
export const HANDOVER_NOTE = 'completed during hand-over';

/** The three browser tools as the model sees them (contract {@link BROWSER_TOOLS_CONTRACT_VERSION}). */
export const BROWSER_TOOL_DEFINITIONS: readonly ToolDefinition[] = Object.freeze([
  {
    name: 'browser.navigate',
    description: `Open a URL of the profile's allowed origins; returns the settled page.${CONTRACT_NOTE}`,
    parameters: z.toJSONSchema(navigateArgsSchema) as Record<string, unknown>,
  },
  {
    name: 'browser.observe',
    description: `Read the page as it is: visible elements with references, text, and a revision.${CONTRACT_NOTE}`,
    parameters: z.toJSONSchema(observeArgsSchema, { unrepresentable: 'any' }) as Record<string, unknown>,
  },
  {
    name: 'browser.act',
    description: `Act on one element of an observation by its revision and reference; returns the settled page, whose revision you may act on again. A secret the run declares (the browser_secrets row: NAME@origins) is typed by fill text {{secret:NAME}}, into a password, one-time-code, username or email field of its origins only; you never see its value, and the page shows it as [secret:NAME]. A file the run was given (the browser_files row: id=name) is set into a file input by action upload with file: its id.${CONTRACT_NOTE}`,
    parameters: z.toJSONSchema(actArgsSchema) as Record<string, unknown>,
  },
]);

/**
 * Contract 1.5.0: the model may ask for a person. Offered beside the three page tools, not among
 * the tools a bound session must define ahead of all others (ADR-0130 d4).
 */
export const REQUEST_PERSON_DEFINITION: ToolDefinition = Object.freeze({
  name: REQUEST_PERSON_TOOL,
  description: `Ask the run's owner to take the page over: a sign-in, a one-time code, a CAPTCHA or a payment you must not do yourself. Say why in reason. The run waits; once the person hands the page back you get how long they held it, how many inputs they sent, the URL now and a fresh observation — never what they typed. Nobody coming in time fails the run.${CONTRACT_NOTE}`,
  parameters: z.toJSONSchema(requestPersonArgsSchema) as Record<string, unknown>,
});

/** What an execution with a page offers its model: the page tools, then the request for a person. */
export const BOUND_TOOL_DEFINITIONS: readonly ToolDefinition[] = Object.freeze([
  ...BROWSER_TOOL_DEFINITIONS,
  REQUEST_PERSON_DEFINITION,
]);

/** A download as the model is told it: what arrived and under which file id, or why it was stopped. */
function downloadForModel(file: RunFile): Record<string, unknown> {
  return file.state === 'stored'
    ? { file_id: file.id, name: file.name, content_type: file.content_type, size_bytes: file.size_bytes }
    : {
        file_id: file.id,
        name: file.name,
        cancelled: file.reason,
        note:
          file.reason === 'too_large' || file.reason === 'run_limit'
            ? "the download passed the run's size limit and was cancelled; it was not kept"
            : 'the download did not complete and was not kept',
      };
}

function isBrowserTool(name: string): name is BrowserToolName {
  return (BROWSER_TOOL_NAMES as readonly string[]).includes(name);
}

/**
 * Runs the browser tools of one run execution through its lease provider. The evidence key stays
 * with the platform (`lastEvidenceKey`), never in the result the model reads (ADR-0130 d7).
 */
export class BrowserToolExecutor implements ToolExecutor {
  lastEvidenceKey: string | null = null;
  /** What the last call captured (the settled page's screenshot), until taken. */
  lastArtifacts: PageArtifacts = {};

  /** The last call's evidence key, once: a failed call leaves none (ADR-0130 d7). */
  takeEvidenceKey(): string | null {
    const key = this.lastEvidenceKey;
    this.lastEvidenceKey = null;
    return key;
  }

  /** The last call's artifacts, once (like the evidence key): a failed call leaves none. */
  takeArtifacts(): PageArtifacts {
    const artifacts = this.lastArtifacts;
    this.lastArtifacts = {};
    return artifacts;
  }

  constructor(
    private readonly provider: BrowserLeaseProvider | undefined,
    /** The horizon a lease is asked for: the run's deadline (ADR-0127). */
    private readonly leaseHorizonMs: number,
  ) {}

  definitions(): readonly ToolDefinition[] {
    return this.provider ? BOUND_TOOL_DEFINITIONS : [];
  }

  /** The contract version of the browser tools this execution offers; null when it offers none. */
  contractVersion(): string | null {
    return this.provider ? BROWSER_TOOLS_CONTRACT_VERSION : null;
  }

  /**
   * ADR-0127 d3, amended: a call an earlier owner of the run dispatched and never had answered (a
   * stop's bound, a lapsed lock), answered from what its lease recorded; never sent again. Applied:
   * the run goes on with a fresh observation, the page it answered with being gone with that owner.
   * Never reached the lease: the lease's sequence was advanced past it first, so no late copy of it
   * can land, and it is refused as before dispatch. Undefined where neither can be told.
   */
  async handedOver(
    call: ToolCall,
    effect: DispatchedEffect,
    context: { invocationId: string; deadlineMs: number; signal: AbortSignal },
  ): Promise<ToolOutcome | undefined> {
    if (!this.provider || (call.name !== 'browser.navigate' && call.name !== 'browser.act')) return undefined;
    let learned: HandoverAnswer;
    try {
      learned = await this.provider.handover(effect, {
        deadlineMs: context.deadlineMs,
        signal: context.signal,
      });
    } catch (error) {
      if (context.signal.aborted)
        throw new ExecutionInterrupted(`${call.name}'s hand-over was interrupted by the worker's shutdown`, {
          cause: error,
        });
      // A browser worker away or restarting may still tell: the run is handed back to ask again
      // (bounded hand-backs), its lease kept. Any other failure tells nothing.
      if (error instanceof BrowserWorkerAway || (error instanceof ProviderError && error.retryable))
        throw error;
      return undefined;
    }
    switch (learned.call) {
      case 'applied': {
        const { outcome: observed } = await this.perform(
          { ...call, name: 'browser.observe', args: {} },
          { ...context, beforeDispatch: async () => undefined },
        );
        const result = observed.ok && typeof observed.result === 'object' ? observed.result : {};
        return {
          ok: true,
          note: HANDOVER_NOTE,
          result: {
            ...result,
            note: observed.ok
              ? `${call.name} ${HANDOVER_NOTE}; this is the page as it is now`
              : `${call.name} ${HANDOVER_NOTE}; observe the page before acting on it`,
          },
        };
      }
      case 'refused':
        if (!learned.code || !isToolErrorCode(learned.code)) return undefined;
        return {
          ok: false,
          code: learned.code,
          message: `${call.name} was refused by the page while its run changed workers; it was not sent again`,
        };
      case 'not_applied':
        return {
          ok: false,
          code: 'page_changed',
          message: `${call.name} had not reached the page when its run changed workers and was refused before dispatch; it was never sent: observe the page and call it again if it is still needed`,
        };
      case 'unknown':
        return undefined;
      default:
        return assertNever(learned.call, 'handed-over call');
    }
  }

  /**
   * Runs one call and answers its outcome with the evidence key and artifacts it produced: the
   * loop's way in, which leaves nothing on the executor for a later call to be handed.
   */
  async perform(call: ToolCall, context: ToolCallContext): Promise<ToolRun> {
    const none = (outcome: ToolOutcome): ToolRun => ({ outcome, evidenceKey: null, artifacts: {} });
    // A valid request for a person parks the run before it gets here (its answer is the loop's).
    if (call.name === REQUEST_PERSON_TOOL) {
      const parsed = requestPersonArgsSchema.safeParse(call.args);
      return none({
        ok: false,
        code: 'invalid_arguments',
        message: parsed.success ? 'this session has no page for a person to take over' : parsed.error.message,
      });
    }
    if (!isBrowserTool(call.name))
      return none({ ok: false, code: 'invalid_arguments', message: `no tool named ${call.name}` });
    if (!this.provider)
      return none({
        ok: false,
        code: 'invalid_arguments',
        message: 'this session is not bound to a browser profile',
      });
    try {
      const result = await executeBrowserTool(
        this.provider,
        call.name,
        call.args,
        {
          invocationId: context.invocationId,
          requestedLeaseExpiresAtMs: this.leaseHorizonMs,
          deadlineMs: context.deadlineMs,
          signal: context.signal,
        },
        { beforeDispatch: context.beforeDispatch },
      );
      const downloads = result.artifacts.downloads ?? [];
      // The model learns what arrived (name, type, size, or why it was cancelled), never the bytes.
      return {
        outcome: {
          ok: true,
          result:
            downloads.length > 0
              ? { observation: result.observation, downloads: downloads.map(downloadForModel) }
              : { observation: result.observation },
        },
        evidenceKey: result.evidenceKey,
        artifacts: result.artifacts,
      };
    } catch (error) {
      // A call cut short by the worker's shutdown is not the tool's outcome: the
      // execution is interrupted (the run is handed back) and its next execution calls again.
      if (context.signal.aborted)
        throw new ExecutionInterrupted(`${call.name} was interrupted by the worker's shutdown`, {
          cause: error,
        });
      if (error instanceof ProviderError) {
        // A navigation that never reached a server left the page on Chromium's error page: the
        // model is shown it with the failure, as after any navigation.
        return {
          outcome: {
            ok: false,
            code: error.code,
            message: error.message,
            // ADR-0177: an exhausted acquisition stays explicitly unverified on the call's record.
            ...(error.unverified ? { unverified: true as const } : {}),
            ...(error.page ? { result: { observation: error.page.observation } } : {}),
          },
          evidenceKey: error.page?.evidenceKey ?? null,
          artifacts: {},
        };
      }
      throw error;
    }
  }

  /** {@link perform}, keeping the evidence key and artifacts until taken (`take…()`). */
  async execute(call: ToolCall, context: ToolCallContext): Promise<ToolOutcome> {
    this.lastEvidenceKey = null;
    this.lastArtifacts = {};
    const ran = await this.perform(call, context);
    this.lastEvidenceKey = ran.evidenceKey;
    this.lastArtifacts = ran.artifacts;
    return ran.outcome;
  }
}
