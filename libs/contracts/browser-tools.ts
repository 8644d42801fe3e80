import { z } from 'zod';

/**
 * The three browser tools, contract 1.2.0 (DESIGN §6, ADR-0159): arguments as the model sends them
 * and the observation every tool returns. The evidence key is not here on purpose: the platform
 * computes it beside the observation and never shows it to the model (ADR-0130 d7).
 */
export const BROWSER_TOOLS_CONTRACT_VERSION = '1.2.0';

/** ADR-0159: a predicate waits 0–5,000 ms, 2,000 ms unless the model says otherwise. */
export const PREDICATE_WAIT_MS_MAX = 5_000;
export const PREDICATE_WAIT_MS_DEFAULT = 2_000;

export const BROWSER_ACTIONS = ['click', 'fill', 'select', 'press', 'check', 'uncheck'] as const;
export type BrowserAction = (typeof BROWSER_ACTIONS)[number];

/** An exact, bounded control role and name with optional state: no selector, pattern or script. */
export const predicateSchema = z.strictObject({
  role: z.string().min(1).max(64),
  name: z.string().min(1).max(512),
  disabled: z.boolean().optional(),
  checked: z.boolean().optional(),
  wait_ms: z.number().int().min(0).max(PREDICATE_WAIT_MS_MAX).default(PREDICATE_WAIT_MS_DEFAULT),
});
export type Predicate = z.output<typeof predicateSchema>;
export type PredicateInput = z.input<typeof predicateSchema>;

/**
 * Issue 11.11: only an absolute http(s) URL is a web page to navigate to. `file:`, `chrome:`,
 * `javascript:`, `data:`, `about:` and the like are bad arguments, refused before anything is sent,
 * so they never reach a lease (an effect refused after sending would cost it: ADR-0127 d3).
 */
function isWebPageUrl(value: string): boolean {
  try {
    const { protocol } = new URL(value);
    return protocol === 'http:' || protocol === 'https:';
  } catch {
    return false;
  }
}

export const navigateArgsSchema = z.strictObject({
  url: z.string().min(1).max(4_096).refine(isWebPageUrl, 'url must be an absolute http(s) URL'),
});
export type NavigateArgs = z.output<typeof navigateArgsSchema>;

export const observeArgsSchema = z
  .strictObject({
    continuation: z.string().min(1).max(256).optional(),
    wait_for: predicateSchema.optional(),
  })
  .refine((args) => args.continuation === undefined || args.wait_for === undefined, {
    message: 'continuation and wait_for are mutually exclusive',
  });
export type ObserveArgs = z.output<typeof observeArgsSchema>;
export type ObserveArgsInput = z.input<typeof observeArgsSchema>;

export const actArgsSchema = z.strictObject({
  revision: z.string().min(1).max(64),
  element: z.string().min(1).max(32),
  action: z.enum(BROWSER_ACTIONS),
  text: z.string().max(4_096).optional(),
  postcondition: predicateSchema.optional(),
});
export type ActArgs = z.output<typeof actArgsSchema>;
export type ActArgsInput = z.input<typeof actArgsSchema>;

/** ADR-0159: how a page settled; `bound_expired` is reported truthfully and is never a failure. */
export const settleResultSchema = z.strictObject({
  result: z.enum(['dom_quiet', 'bound_expired']),
  elapsed_ms: z.number().int().nonnegative(),
});
export type SettleResult = z.output<typeof settleResultSchema>;

export const elementStateSchema = z.strictObject({
  disabled: z.boolean().optional(),
  checked: z.union([z.boolean(), z.literal('mixed')]).optional(),
  expanded: z.boolean().optional(),
  selected: z.boolean().optional(),
  value: z.string().optional(),
  /** Issue 11: a password or one-time-code field says whether it holds a value, never the value. */
  value_present: z.boolean().optional(),
});
export type ElementState = z.output<typeof elementStateSchema>;

export const observedElementSchema = z.strictObject({
  ref: z.string(),
  role: z.string(),
  name: z.string(),
  state: elementStateSchema,
});
export type ObservedElement = z.output<typeof observedElementSchema>;

/** Which part of the visible elements this observation shows (DESIGN §6: at most 256 of 4,096 candidates). */
export const observationWindowSchema = z.strictObject({
  offset: z.number().int().nonnegative(),
  count: z.number().int().nonnegative(),
  visible_seen: z.number().int().nonnegative(),
  candidates_checked: z.number().int().nonnegative(),
  candidate_limit_reached: z.boolean(),
  continuation: z.string().nullable(),
});
export type ObservationWindow = z.output<typeof observationWindowSchema>;

/** ADR-0159: a predicate is checked against the current observation window only, and says so. */
export const conditionResultSchema = z.strictObject({
  result: z.enum(['satisfied', 'ambiguous', 'not_observed']),
  scope: z.literal('observation_window'),
  observations: z.number().int().positive(),
  elapsed_ms: z.number().int().nonnegative(),
});
export type ConditionResult = z.output<typeof conditionResultSchema>;

export const browserObservationSchema = z.strictObject({
  url: z.string(),
  title: z.string(),
  text: z.string(),
  text_truncated: z.boolean(),
  revision: z.string(),
  /** Null on an explicit observe: ordinary observation does not claim it waited for stability. */
  settle: settleResultSchema.nullable(),
  elements: z.array(observedElementSchema),
  window: observationWindowSchema,
  condition: conditionResultSchema.optional(),
  /**
   * Issue 11: what the origin fence blocked during this call besides a navigation (which fails
   * `url_disallowed`): popups closed before they loaded, child frames, subresources. Absent when none.
   */
  blocked: z
    .strictObject({
      popups: z.number().int().nonnegative(),
      frames: z.number().int().nonnegative(),
      subresources: z.number().int().nonnegative(),
    })
    .optional(),
});
export type BrowserObservation = z.output<typeof browserObservationSchema>;
