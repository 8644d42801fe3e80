import type { ToolCallContext, ToolExecutor, ToolRun } from './loop-ports.js';
import type { ToolCall } from './model.js';

/**
 * Runs one call through `tools` and answers what it produced: by {@link ToolExecutor.perform} where
 * the executor has it, else by `execute` with the evidence key and artifacts taken at once after
 * it — the one place they are taken, so no later call can be handed this one's.
 */
export async function performCall(
  tools: ToolExecutor,
  call: ToolCall,
  context: ToolCallContext,
): Promise<ToolRun> {
  if (tools.perform) return tools.perform(call, context);
  const outcome = await tools.execute(call, context);
  return {
    outcome,
    evidenceKey: tools.takeEvidenceKey?.() ?? null,
    artifacts: tools.takeArtifacts?.() ?? {},
  };
}
