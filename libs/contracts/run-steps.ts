import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { conditionResultSchema, settleResultSchema } from './browser-tools.js';
import { recordIdSchema } from './ids.js';
import { runFileSchema } from './run-files.js';

/**
 * What a run did, step by step: each model turn and each tool call is a step record,
 * tenant-scoped through its run and expiring with it. Screenshots are artifacts: the step holds
 * their names only, the bytes sit in the artifact store (a local folder or an S3-compatible bucket).
 */

/**
 * An artifact's name within its run: letters, digits, `_` and `-`, then `.jpg` or `.png`. Never a
 * path: the store files it under the run (`<tenant>/<run id>/<name>`), and the API serves it at
 * `/v1/runs/{id}/artifacts/{name}` after the run's tenant check.
 */
export const artifactNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,80}\.(jpg|png)$/, 'letters, digits, _ or -, then .jpg or .png');
export type ArtifactName = z.output<typeof artifactNameSchema>;

/**
 * A name the artifact store keeps: a screenshot's ({@link artifactNameSchema}) or a file's bytes
 * (`<file id>.bin`, see run-files.ts). Only screenshots are served under `/artifacts/`.
 */
export const storedArtifactNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,80}\.(jpg|png|bin)$/, 'letters, digits, _ or -, then .jpg, .png or .bin');

/**
 * A fresh artifact name for a JPEG screenshot: random, so a name reveals nothing and never
 * collides, and decided before the capture, so a call can answer it while the picture is taken.
 */
export function newScreenshotName(kind: 'shot' | 'preview'): ArtifactName {
  return `${kind}-${randomBytes(12).toString('base64url')}.jpg`;
}

/**
 * Where a screenshot named by a step or an approval card is (the browser worker takes it after the
 * call answered): `pending` while it is captured and written, `stored` once the artifact can be
 * read, `failed` with the reason when it could not be had after one retry.
 */
export const SCREENSHOT_STATES = ['pending', 'stored', 'failed'] as const;
export type ScreenshotState = (typeof SCREENSHOT_STATES)[number];

/**
 * Why a screenshot could not be had: the capture timed out (twice, each inside the browser
 * worker's `BROWSER_SCREENSHOT_TIMEOUT_MS`) or failed; a dialog held the page; the lease's page
 * was closed first; the artifact store refused the write; or the page call that was to take it
 * (an approval's preview) was refused.
 */
export const SCREENSHOT_FAILURES = [
  'capture_timeout',
  'capture_error',
  'dialog_open',
  'page_closed',
  'store_error',
  'not_taken',
] as const;
export type ScreenshotFailure = (typeof SCREENSHOT_FAILURES)[number];

export const screenshotStatusSchema = z.object({
  state: z.enum(SCREENSHOT_STATES),
  /** Why a `failed` screenshot is missing; null otherwise. */
  reason: z.enum(SCREENSHOT_FAILURES).nullable(),
});
export type ScreenshotStatus = z.output<typeof screenshotStatusSchema>;

/** Screenshots are JPEG of the viewport, at most this wide and tall, at this quality. */
export const SCREENSHOT_LIMITS = { maxWidth: 1280, maxHeight: 800, quality: 60 } as const;

/** At most this many console errors, and this many failed requests, are kept of one call. */
export const PAGE_LOG_LIMIT = 20;
/** A console error's text is cut at this many characters (an ellipsis ends a cut one). */
export const PAGE_LOG_TEXT_MAX_CHARS = 500;

/**
 * What a page reported while one navigate or act ran, for the person reading the run (never the
 * model): its console errors (uncaught exceptions among them) and its failed requests (a network
 * error, or an HTTP status of 400 or more), each at most {@link PAGE_LOG_LIMIT}, in order; how many
 * more there were is counted. URLs are kept without their query or fragment, and a run's declared
 * secrets are struck from every text, so the log holds no more than the page's address would.
 */
export const pageLogSchema = z.object({
  console_errors: z
    .array(
      z.object({
        text: z.string().max(PAGE_LOG_TEXT_MAX_CHARS + 1),
        /** The script's or page's URL the error names, without query or fragment; null when none. */
        url: z.string().nullable(),
      }),
    )
    .max(PAGE_LOG_LIMIT),
  failed_requests: z
    .array(
      z.object({
        method: z.string(),
        /** Without query or fragment. */
        url: z.string(),
        /** The HTTP status of an answer of 400 or more; null for a request that got none. */
        status: z.number().int().nullable(),
        /** Chromium's network error (`net::ERR_…`) of a request that got no answer; null otherwise. */
        failure: z.string().nullable(),
      }),
    )
    .max(PAGE_LOG_LIMIT),
  /** How many were left out past the bound. */
  console_errors_dropped: z.number().int().nonnegative(),
  failed_requests_dropped: z.number().int().nonnegative(),
});
export type PageLog = z.output<typeof pageLogSchema>;

/**
 * What the browser worker captured beside a page call's answer (data plane, not the model's
 * observation): the settled page's screenshot after navigate and act, the outlined target of a
 * preview (names only), and after navigate and act the page's log.
 */
export const pageArtifactsSchema = z.object({
  screenshot: artifactNameSchema.optional(),
  /** What the page reported while navigate or act ran: its console errors and failed requests. */
  page_log: pageLogSchema.optional(),
  /** The downloads the call's pages started, each kept (or cancelled) by the browser worker. */
  downloads: z.array(runFileSchema).optional(),
});
export type PageArtifacts = z.output<typeof pageArtifactsSchema>;

export const STEP_KINDS = ['model', 'tool'] as const;
/** `waiting_approval`: a tool call parked on its approval; it ends when a later execution answers it. */
export const STEP_STATUSES = ['started', 'waiting_approval', 'ended'] as const;

const count = z.number().int().nonnegative();

/** A step's outcome: `ok`, or the stable code and message it failed with. */
export const stepOutcomeSchema = z.object({
  ok: z.boolean(),
  code: z.string().nullable(),
  message: z.string().nullable(),
});
export type StepOutcome = z.output<typeof stepOutcomeSchema>;

export const modelStepSchema = z.object({
  input_tokens: count,
  cached_input_tokens: count,
  output_tokens: count,
  cost_micro_usd: count,
  /** The calls this turn asked for, in order (their arguments are on the tool steps). */
  tool_calls: z.array(z.object({ id: z.string(), name: z.string() })),
  /** Whether this turn gave the run's final answer. */
  answered: z.boolean(),
});

export const personStepSchema = z.object({
  holder: z.string(),
  since_ms: count,
  ended_at_ms: count,
  inputs: count.nullable(),
  start_url: z.string().nullable(),
  end_url: z.string().nullable(),
});
export type PersonStep = z.output<typeof personStepSchema>;

export const toolStepSchema = z.object({
  name: z.string(),
  invocation_id: z.string(),
  /**
   * The arguments as the run recorded them: text typed into a password or one-time-code field and
   * any argument a tool marks secret read `[secret]`. Never the real value.
   */
  arguments: z.json(),
  outcome: stepOutcomeSchema.nullable(),
  /** How the page settled after navigate or act (ADR-0159); null for other tools and failures. */
  settle: settleResultSchema.nullable(),
  /**
   * The element `browser.act` acted on, by role and name as the observation of its revision named
   * it (the page the model saw); null for other tools and where that observation is not at hand.
   */
  target: z.object({ role: z.string(), name: z.string() }).nullable().default(null),
  /** The page's console errors and failed requests while navigate or act ran; null otherwise. */
  page_log: pageLogSchema.nullable().default(null),
  /** The act's postcondition result, when it had one. */
  postcondition: conditionResultSchema.nullable(),
  /** The observation's page: url and title, as the model saw them. */
  page: z.object({ url: z.string(), title: z.string() }).nullable(),
  /** The settled page's screenshot (artifact name), after navigate and act. */
  screenshot: artifactNameSchema.nullable(),
  /**
   * Where that screenshot is: taken after the call answered, it may still be `pending`, or have
   * `failed` with its reason. Read beside the step, never stored in it; null without a screenshot
   * and for a screenshot written before its call answered (it is `stored`).
   */
  screenshot_status: screenshotStatusSchema.nullable().default(null),
  /** The approval a parked call waits on (or was decided by). */
  approval_id: recordIdSchema.nullable(),
  /**
   * A person's takeover this call waited on (`browser.request_person`): who held the page, from
   * when to when, how many inputs they sent, the URL they were given and the one they left. Never
   * what they typed. Null for every other call.
   */
  person: personStepSchema.nullable().default(null),
  /** The downloads this call's act (or navigation) started: kept under the run, or cancelled and why. */
  downloads: z.array(runFileSchema).default([]),
});

/**
 * One step. `id` is stable across the run's executions: `a<attempt>-m<turn>` for a model turn,
 * `a<attempt>-t<turn>-<index>` for a tool call (the invocation's step and place in its turn).
 * `seq` orders a run's steps as they started.
 */
export const runStepSchema = z.object({
  id: z.string().regex(/^a\d+-(m\d+|t\d+-\d+)$/),
  run_id: recordIdSchema,
  seq: z.number().int().positive(),
  attempt: z.number().int().positive(),
  turn: z.number().int().positive(),
  index: count.nullable(),
  kind: z.enum(STEP_KINDS),
  status: z.enum(STEP_STATUSES),
  started_at_ms: count,
  ended_at_ms: count.nullable(),
  duration_ms: count.nullable(),
  model: modelStepSchema.nullable(),
  tool: toolStepSchema.nullable(),
});
export type RunStep = z.output<typeof runStepSchema>;

export function modelStepId(attempt: number, turn: number): string {
  return `a${attempt}-m${turn}`;
}
export function toolStepId(attempt: number, turn: number, index: number): string {
  return `a${attempt}-t${turn}-${index}`;
}

/** Pages of steps and runs: at most 100 items; `next_cursor` is null on the last page. */
export const PAGE_LIMIT_MAX = 100;
export const PAGE_LIMIT_DEFAULT = 50;

export const stepPageSchema = z.object({
  steps: z.array(runStepSchema),
  next_cursor: z.string().nullable(),
});

/**
 * What an approval shows the person deciding it: the target element's role and name as
 * the page named it, the page's URL, and a screenshot with the target outlined. Fields are null
 * where they could not be had (no observation of that revision; the page could not be captured).
 */
export const approvalCardSchema = z.object({
  element: z.object({ role: z.string(), name: z.string() }).nullable(),
  action: z.string().nullable(),
  page_url: z.string().nullable(),
  page_title: z.string().nullable(),
  screenshot: artifactNameSchema.nullable(),
  /** Where that screenshot is (as a step's `screenshot_status`); read beside the card, never stored in it. */
  screenshot_status: screenshotStatusSchema.nullable().default(null),
  /** An `upload`'s file: its id and the name it was uploaded with (null when unknown or not an upload). */
  file: z.object({ id: z.string(), name: z.string().nullable() }).nullable().default(null),
});
export type ApprovalCard = z.output<typeof approvalCardSchema>;

/** Webhook event types a tenant may subscribe to. */
export const WEBHOOK_EVENT_TYPES = ['approval.requested', 'run.ended', 'person.requested'] as const;
export const webhookEventTypeSchema = z.enum(WEBHOOK_EVENT_TYPES);
