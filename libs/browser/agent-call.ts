import type { Frame, JSHandle } from 'playwright-core';
import { pageAgentScript } from './page-script/bundle.js';
import { PAGE_AGENT_GLOBAL } from './page-script/page-agent-global.js';

/**
 * Calls into the page agent of a frame's current document, injecting it first where the document
 * predates the engine's init script. Calls are sent as expressions, never as serialized Node
 * functions, so what a transpiler adds to a function body can never reach the page.
 */
export async function callAgent<T>(frame: Frame, call: string): Promise<T> {
  const expression = `(async () => {
    const agent = window[${JSON.stringify(PAGE_AGENT_GLOBAL)}];
    if (!agent) return { missing: true };
    return { missing: false, value: await agent.${call} };
  })()`;
  let answer = (await frame.evaluate(expression)) as { missing: boolean; value?: T };
  if (answer.missing) {
    await frame.evaluate(await pageAgentScript());
    answer = (await frame.evaluate(expression)) as { missing: boolean; value?: T };
  }
  if (answer.missing) throw new Error('the page agent could not be injected into the document');
  return answer.value as T;
}

/** A handle to what an agent call returns, in the frame's own execution context. */
export async function agentHandle(frame: Frame, call: string): Promise<JSHandle> {
  const expression = `(() => {
    const agent = window[${JSON.stringify(PAGE_AGENT_GLOBAL)}];
    return agent ? agent.${call} : undefined;
  })()`;
  const present = await frame.evaluate(`!!window[${JSON.stringify(PAGE_AGENT_GLOBAL)}]`);
  if (!present) await frame.evaluate(await pageAgentScript());
  return frame.evaluateHandle(expression);
}

/** A JSON literal for an agent call's argument list. */
export function literal(value: unknown): string {
  return JSON.stringify(value);
}
