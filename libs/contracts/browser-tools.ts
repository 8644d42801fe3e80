import { z } from 'zod';
import { fileIdSchema } from './run-files.js';

/**
 * The three browser tools, contract 1.4.0 (DESIGN §6, ADR-0159): arguments as the model
 * sends them and the observation every tool returns. The evidence key is not here on purpose: the
 * platform computes it beside the observation and never shows it to the model (ADR-0130 d7).
 *
 * 1.3.0 is additive over 1.2.0: the observation may carry `tabs`, `scroll` and `dialog`, an element
 * its `input_type` and more state (`values`, `min`, `max`), and act takes `labels` (a multiple
 * select) and the dialog actions `accept` / `dismiss`. A 1.2.0 caller's arguments mean what they
 * meant; what it does not know of the answer it may ignore.
 *
 * 1.4.0 is additive over 1.3.0: `tabs.pending` (tabs a page announced that have not committed
 * yet); the code `navigation_failed` (a navigation whose request never reached a server, with
 * Chromium's `net::` error name and an observation of the error page; the lease is kept); and
 * `fill` text may name a run's declared secret as `{{secret:NAME}}` (run-secrets.ts), such a fill
 * refused `secret_not_allowed` when the field or origin is not the secret's. Every code and field
 * a 1.4.0 change adds is listed here, the version set in the two lines below.
 *
 * 1.5.0 is additive over 1.4.0: the tool `browser.request_person {reason}` asks the run's owner
 * to take the page over (a sign-in, a one-time code, a CAPTCHA); it answers once the person hands
 * the page back, with how long they held it, how many inputs they sent, the URL now and a fresh
 * observation — never what they typed. The run fails `person_timeout` when nobody comes.
 *
 * 1.6.0 is additive over 1.5.0: the act action `upload` with `file` (an uploaded file's id that
 * the run's input lists) sets an `<input type=file>`'s files to that file. It is refused before
 * dispatch `action_not_allowed` when the element is not a file input, and `invalid_arguments` when
 * the file is not the run's; like every act it is an effect (sequenced, approval-able, never
 * replayed).
 */
export const BROWSER_TOOLS_CONTRACT_VERSION = '1.6.0';
/** The earlier contract versions a caller may still speak (their arguments are a subset). */
export const BROWSER_TOOLS_COMPATIBLE_VERSIONS = ['1.2.0', '1.3.0', '1.4.0', '1.5.0', '1.6.0'] as const;

/** The tool a model asks for a person with (contract 1.5.0). */
export const REQUEST_PERSON_TOOL = 'browser.request_person' as const;
/** The longest reason a request for a person may give: it is shown on the run page and in webhooks. */
export const PERSON_REASON_MAX_CHARS = 500;
export const requestPersonArgsSchema = z.strictObject({
  reason: z.string().min(1).max(PERSON_REASON_MAX_CHARS),
});
export type RequestPersonArgs = z.output<typeof requestPersonArgsSchema>;

/** The reference an open dialog (alert, confirm, prompt) is acted on by. */
export const DIALOG_REF = 'dialog';
/** How many pages (tabs) one lease keeps open at most; the oldest is closed first. */
export const MAX_TABS_PER_LEASE = 4;

/** ADR-0159: a predicate waits 0–5,000 ms, 2,000 ms unless the model says otherwise. */
export const PREDICATE_WAIT_MS_MAX = 5_000;
export const PREDICATE_WAIT_MS_DEFAULT = 2_000;

/**
 * `accept` and `dismiss` answer the open dialog (element {@link DIALOG_REF}; `accept` on a prompt
 * takes `text`). `select` takes `text` (one option's label or value) or `labels` (a multiple
 * select: every label to choose). `fill` on a date, time, month or week field takes its ISO form.
 * `upload` (1.6.0) takes `file` and sets a file input's files to it.
 */
export const BROWSER_ACTIONS = [
  'click',
  'fill',
  'select',
  'press',
  'check',
  'uncheck',
  'accept',
  'dismiss',
  'upload',
] as const;
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
 * Only an absolute http(s) URL is a web page to navigate to. `file:`, `chrome:`,
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
  /** `select` on a multiple select: the labels of every option to choose (others are unchosen). */
  labels: z.array(z.string().max(512)).min(1).max(64).optional(),
  /** `upload` (1.6.0): the id of an uploaded file the run's input lists (`fil_…`). */
  file: fileIdSchema.optional(),
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
  /**
   * A text-like field's value (a date in its ISO form), a single select's chosen option label, a
   * slider's, spin button's, meter's or progress bar's current value, a contenteditable's text.
   */
  value: z.string().optional(),
  /** A multiple select's chosen option labels, in the list's order. */
  values: z.array(z.string()).optional(),
  /** A range's bounds (slider, spin button, meter, progress bar) where it has them. */
  min: z.number().optional(),
  max: z.number().optional(),
  /** A password or one-time-code field says whether it holds a value, never the value. */
  value_present: z.boolean().optional(),
});
export type ElementState = z.output<typeof elementStateSchema>;

/**
 * One visible control. `role` is the one Playwright's `getByRole` finds it by (password,
 * date, time and color inputs and contenteditable regions are textboxes, a file input a button).
 */
export const observedElementSchema = z.strictObject({
  ref: z.string(),
  role: z.string(),
  name: z.string(),
  /**
   * An `<input>`'s type where the role alone does not say what to type (password, date,
   * time, datetime-local, month, week, color, email, url, tel, search, number, range, file);
   * absent otherwise.
   * A `file` input takes the action `upload` (1.6.0) and no other.
   */
  input_type: z.string().optional(),
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
   * The page's scroll position and size, in CSS pixels, so a model knows there is more
   * above or below the viewport (acting on an element scrolls it into view first).
   */
  scroll: z
    .strictObject({
      x: z.number().int().nonnegative(),
      y: z.number().int().nonnegative(),
      width: z.number().int().nonnegative(),
      height: z.number().int().nonnegative(),
      viewport_width: z.number().int().nonnegative(),
      viewport_height: z.number().int().nonnegative(),
    })
    .optional(),
  /**
   * The lease's pages. The observation describes the current one (`index`, 0 the first);
   * `event` says the call opened a new tab (which became current) or that the current tab closed
   * and the previous one is current again. Absent while the lease has one page and nothing changed.
   * 1.4.0: `pending` counts tabs a page announced that have not committed yet (an act waits for the
   * tabs it opened until its deadline); the call that finds one committed says `opened`.
   */
  tabs: z
    .strictObject({
      count: z.number().int().positive(),
      index: z.number().int().nonnegative(),
      event: z.enum(['opened', 'closed']).nullable(),
      pending: z.number().int().positive().optional(),
    })
    .optional(),
  /**
   * A dialog the page opened and nobody answered yet. Act on it with element
   * `dialog` and action `accept` (with `text` for a prompt) or `dismiss`; until then the page
   * waits. Absent when none is open.
   */
  dialog: z
    .strictObject({
      type: z.enum(['alert', 'confirm', 'prompt', 'beforeunload']),
      message: z.string(),
      default_value: z.string().optional(),
    })
    .optional(),
  /**
   * What the origin fence blocked during this call besides a navigation (which fails
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
