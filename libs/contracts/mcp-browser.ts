import { z } from 'zod';
import { API_KEY_CHAIN_MAX } from './api-keys.js';
import { recordIdSchema } from './ids.js';

/**
 * MCP browser mode: the MCP client is the run's model. These are the records that cross
 * between the API (which holds the client's MCP session) and the run worker (which runs the loop),
 * through the run's own Redis keys.
 */

/** The MCP browser mode's tools: one model turn each (`finish` answers and ends the run). */
export const MCP_BROWSER_TOOLS = ['navigate', 'observe', 'act', 'request_person', 'finish'] as const;
export type McpBrowserTool = (typeof MCP_BROWSER_TOOLS)[number];

/** The answer `finish` carries; as long as a scripted run's answer may be. */
export const MCP_FINISH_ANSWER_MAX_CHARS = 10_000;

/**
 * One call the client made, as the API hands it to the run's worker. `id` is the API's, stable:
 * the turn's tool call carries it, so the transcript, the ledger and the result key agree on it.
 */
export const mcpTurnCallSchema = z.strictObject({
  id: z.string().regex(/^mcp_[A-Za-z0-9_-]{8,64}$/),
  tool: z.enum(MCP_BROWSER_TOOLS),
  args: z.record(z.string(), z.unknown()),
});
export type McpTurnCall = z.output<typeof mcpTurnCallSchema>;

/** What one call gave, as the worker publishes it for the API: the loop's tool outcome. */
export const mcpTurnResultSchema = z.strictObject({
  call_id: z.string().min(1).max(128),
  tool: z.string().min(1).max(128),
  outcome: z.union([
    z.strictObject({ ok: z.literal(true), result: z.unknown() }),
    z.strictObject({
      ok: z.literal(false),
      code: z.string().min(1).max(128),
      message: z.string().max(4_096),
      unverified: z.literal(true).optional(),
    }),
  ]),
});
export type McpTurnResult = z.output<typeof mcpTurnResultSchema>;

/**
 * A run's input says who drives it: `driver: 'mcp'` marks a run whose model is an MCP client, and
 * `driver_key_id` names the API key that drives it. `driver_makers` are the keys that made that key,
 * as it was when the run began, kept with the run so that revoking the driver hides none of them.
 * No key of that chain decides the run's approvals (see `inCreationChain`).
 */
export const mcpDriverSchema = z.object({
  driver: z.literal('mcp'),
  driver_key_id: recordIdSchema,
  driver_makers: z.array(recordIdSchema).max(API_KEY_CHAIN_MAX).optional(),
});

/** The driving key of a run driven over MCP, or undefined for any other run. */
export function mcpDriverKeyOf(run: { input: unknown }): string | undefined {
  return mcpDriverOf(run)?.driver_key_id;
}

/** Who drives a run over MCP (its key and that key's makers, where the run kept them), or undefined. */
export function mcpDriverOf(run: { input: unknown }): z.output<typeof mcpDriverSchema> | undefined {
  const parsed = mcpDriverSchema.safeParse(run.input);
  return parsed.success ? parsed.data : undefined;
}
