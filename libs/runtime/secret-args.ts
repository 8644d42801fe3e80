import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { onlySecretReferences } from '../contracts/index.js';
import type { ToolCall, ToolDefinition, TranscriptEntry } from './model.js';
import { TOOL_CALL_NAME } from './roster.js';

/**
 * Text typed into a secret field never leaves the browser in a record. What
 * the run records of a call — transcript, approvals, events, logs, the breaker's state — carries this
 * marker in place of a secret argument; the real value reaches the data plane only.
 */
export const SECRET_MARKER = '[secret]';

/**
 * Seals a call's secret arguments for the one place they must survive an execution: a call parked
 * on its approval and dispatched by a later execution, maybe in another worker. AES-256-GCM under a
 * key derived from the deployment's secret and the run id, bound to the call id, so a blob is
 * useless elsewhere and a swapped one fails to open.
 */
export interface ArgumentSealer {
  seal(callId: string, values: Readonly<Record<string, string>>): string;
  /** The values sealed for `callId`; undefined when the blob does not open (another key, altered). */
  unseal(callId: string, blob: string): Record<string, string> | undefined;
}

export function argumentSealer(deploymentSecret: string, runId: string): ArgumentSealer {
  const key = createHmac('sha256', deploymentSecret).update(`tool-secret-arguments\n${runId}`).digest();
  return {
    seal(callId, values) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(callId));
      const body = Buffer.concat([cipher.update(JSON.stringify(values), 'utf8'), cipher.final()]);
      return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
    },
    unseal(callId, blob) {
      try {
        const raw = Buffer.from(blob, 'base64');
        const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
        decipher.setAAD(Buffer.from(callId));
        decipher.setAuthTag(raw.subarray(12, 28));
        const text = Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
        const values = JSON.parse(text) as unknown;
        if (!values || typeof values !== 'object') return undefined;
        return Object.fromEntries(
          Object.entries(values).filter((entry): entry is [string, string] => typeof entry[1] === 'string'),
        );
      } catch {
        return undefined;
      }
    },
  };
}

interface ObservedElement {
  ref?: unknown;
  role?: unknown;
  state?: unknown;
}

/**
 * Whether an act's target, by its reference in the observation of the revision it names, is a
 * secret field: the page engine marks one with `state.value_present` (engineer A) and
 * never shows its value; a role that says password or one-time code counts too.
 */
function targetIsSecretField(args: Record<string, unknown>, transcript: readonly TranscriptEntry[]): boolean {
  if (typeof args.revision !== 'string' || typeof args.element !== 'string') return false;
  for (let index = transcript.length - 1; index >= 0; index -= 1) {
    const entry = transcript[index];
    if (entry?.kind !== 'tool' || !entry.outcome.ok) continue;
    const observation = (entry.outcome.result as { observation?: { revision?: unknown; elements?: unknown } })
      ?.observation;
    if (observation?.revision !== args.revision || !Array.isArray(observation.elements)) continue;
    const element = (observation.elements as ObservedElement[]).find(
      (candidate) => candidate?.ref === args.element,
    );
    if (!element) continue;
    const state = element.state;
    if (state && typeof state === 'object' && 'value_present' in state) return true;
    if (typeof element.role === 'string' && /password|one-time/i.test(element.role)) return true;
    return false;
  }
  return false;
}

/**
 * The names of a call's arguments that are secret: those its tool's definition marks
 * (`secretArguments`), and a browser act's `text` when it targets a secret field.
 */
export function secretArgumentNames(
  call: ToolCall,
  definitions: readonly ToolDefinition[],
  transcript: readonly TranscriptEntry[],
): string[] {
  const names = new Set(definitions.find((definition) => definition.name === call.name)?.secretArguments);
  if (
    call.name === 'browser.act' &&
    typeof call.args.text === 'string' &&
    // A declared secret's reference (`{{secret:pw}}`) is no secret: the value is the browser
    // worker's alone (DESIGN §12), and the records say which secret was typed.
    !onlySecretReferences(call.args.text) &&
    targetIsSecretField(call.args, transcript)
  )
    names.add('text');
  return [...names].filter(
    (name) => typeof call.args[name] === 'string' && call.args[name] !== SECRET_MARKER,
  );
}

/** A model turn's calls as the run records them, and each call's secret values, by call id. */
export interface RecordedTurn {
  toolCalls: ToolCall[];
  secrets: Map<string, Record<string, string>>;
}

/** Replaces every secret argument of a turn's calls with {@link SECRET_MARKER}. */
export function recordTurn(
  calls: readonly ToolCall[],
  definitions: readonly ToolDefinition[],
  transcript: readonly TranscriptEntry[],
): RecordedTurn {
  const secrets = new Map<string, Record<string, string>>();
  const toolCalls = calls.map((call) => {
    const inner = deferredCallOf(call);
    if (inner) {
      // A deferred tool called through `tool.call`: its own arguments sit under `arguments`.
      const recorded = recordTurn([inner], definitions, transcript);
      const values = recorded.secrets.get(call.id);
      if (!values) return call;
      secrets.set(call.id, values);
      return { ...call, args: { ...call.args, arguments: recorded.toolCalls[0]?.args } };
    }
    const names = secretArgumentNames(call, definitions, transcript);
    if (names.length === 0) return call;
    const values: Record<string, string> = {};
    const args = { ...call.args };
    for (const name of names) {
      values[name] = args[name] as string;
      args[name] = SECRET_MARKER;
    }
    secrets.set(call.id, values);
    return { ...call, args };
  });
  return { toolCalls, secrets };
}

/** The call a `tool.call` names (as `resolveDeferredCall` resolves it), with the same id. */
function deferredCallOf(call: ToolCall): ToolCall | undefined {
  if (call.name !== TOOL_CALL_NAME) return undefined;
  const { name, arguments: args } = call.args as { name?: unknown; arguments?: unknown };
  if (typeof name !== 'string' || !args || typeof args !== 'object' || Array.isArray(args)) return undefined;
  return { id: call.id, name, args: args as Record<string, unknown> };
}

/** The call to dispatch: its recorded arguments with the secret values put back. */
export function revealCall(call: ToolCall, values: Readonly<Record<string, string>>): ToolCall {
  const args = { ...call.args };
  for (const [name, value] of Object.entries(values)) if (args[name] === SECRET_MARKER) args[name] = value;
  return { ...call, args };
}

/**
 * The values the run's model typed as secret arguments (a password it was given in its input and
 * typed itself, not a declared secret): this execution's, and those its earlier executions sealed
 * on their turns. The step records strike them from the page's URL and title (a site that echoes a
 * typed password there), as the arguments read `[secret]`.
 */
export function typedSecretValues(
  transcript: readonly TranscriptEntry[],
  thisExecution: ReadonlyMap<string, Record<string, string>>,
  sealer: ArgumentSealer | undefined,
): string[] {
  const values = new Set<string>();
  const add = (record: Readonly<Record<string, string>> | undefined) => {
    for (const value of Object.values(record ?? {})) if (value.length > 0) values.add(value);
  };
  for (const record of thisExecution.values()) add(record);
  for (const entry of transcript) {
    if (entry.kind !== 'model' || !entry.sealedArgs) continue;
    for (const [callId, blob] of Object.entries(entry.sealedArgs)) {
      if (!thisExecution.has(callId) && blob) add(sealer?.unseal(callId, blob));
    }
  }
  return [...values];
}
