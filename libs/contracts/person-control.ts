import { z } from 'zod';

/**
 * A person on the lease's page (the data plane's live view and person control): the screencast's
 * events, the control's start and end, and the input a person sends. Input carries key, mouse,
 * wheel and text events and the answer to the page's open dialog only — never a DevTools command, a
 * file drag or a file chooser — and its contents are never logged or stored.
 */

/** Who holds the page: the caller's own name for the person (`principal:<id>` from the API). */
export const personHolderSchema = z.string().min(1).max(200);

/** The longest a person holds a page without renewing the control. */
export const PERSON_CONTROL_MAX_SECONDS = 3_600;
/** Input events in one batch. */
export const PERSON_INPUT_BATCH_MAX = 50;
/** Characters of one text event. */
export const PERSON_TEXT_MAX_CHARS = 1_000;

export const startPersonControlSchema = z.object({
  holder: personHolderSchema,
  seconds: z.number().int().min(1).max(PERSON_CONTROL_MAX_SECONDS),
});
export type StartPersonControl = z.output<typeof startPersonControlSchema>;

export const endPersonControlSchema = z.object({ holder: personHolderSchema });

/** A viewport coordinate in CSS pixels of the page (the frame's `width` × `height`). */
const coordinate = z.number().min(0).max(100_000);
const mouseButtonSchema = z.enum(['left', 'middle', 'right']);

export const personInputEventSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('mouse'),
    action: z.enum(['move', 'down', 'up']),
    x: coordinate,
    y: coordinate,
    button: mouseButtonSchema.optional(),
    clicks: z.number().int().min(1).max(3).optional(),
  }),
  z.object({
    type: z.literal('wheel'),
    x: coordinate,
    y: coordinate,
    dx: z.number().min(-10_000).max(10_000),
    dy: z.number().min(-10_000).max(10_000),
  }),
  z.object({
    type: z.literal('key'),
    action: z.enum(['down', 'up']),
    // A KeyboardEvent's `key` ("a", "Enter", "Shift"); never a DevTools command.
    key: z.string().min(1).max(32),
    code: z.string().max(32).optional(),
  }),
  z.object({ type: z.literal('text'), text: z.string().min(1).max(PERSON_TEXT_MAX_CHARS) }),
  // The answer to the current tab's open dialog (the live view's `dialog` event): accept (a
  // prompt's `text` with it) or dismiss. Skipped when no dialog is open by the time it is dispatched.
  z.object({
    type: z.literal('dialog'),
    accept: z.boolean(),
    text: z.string().max(PERSON_TEXT_MAX_CHARS).optional(),
  }),
]);
export type PersonInputEvent = z.output<typeof personInputEventSchema>;

export const personInputSchema = z.object({
  holder: personHolderSchema,
  events: z.array(personInputEventSchema).min(1).max(PERSON_INPUT_BATCH_MAX),
});
export type PersonInput = z.output<typeof personInputSchema>;

export const personControlAnswerSchema = z.object({
  /** The lease's last action once the control began (it advanced: no earlier reference survives). */
  sequence: z.number().int(),
  since_ms: z.number().int(),
  until_ms: z.number().int(),
});
export type PersonControlAnswer = z.output<typeof personControlAnswerSchema>;

export const personControlEndAnswerSchema = z.object({
  sequence: z.number().int(),
  since_ms: z.number().int(),
  ended_ms: z.number().int(),
  /** How many input events the person sent; never what they were. */
  inputs: z.number().int(),
  /** The current tab's URL as the person left it. */
  url: z.string(),
});
export type PersonControlEndAnswer = z.output<typeof personControlEndAnswerSchema>;

export const personInputAnswerSchema = z.object({ sequence: z.number().int() });

/** Who holds the page now, as the live view tells it (`null`: the agent has it). */
export const livePersonSchema = z
  .object({ holder: personHolderSchema, since_ms: z.number().int(), until_ms: z.number().int() })
  .nullable();
export type LivePerson = z.output<typeof livePersonSchema>;

/** `event: frame` of the live view: one screencast frame of the lease's current tab. */
export const liveFrameSchema = z.object({
  jpeg: z.string(),
  url: z.string(),
  /** Changes when the lease's current tab does. */
  tab: z.number().int(),
  /** The page's viewport in CSS pixels: input coordinates are in this space. */
  width: z.number(),
  height: z.number(),
});
export type LiveFrame = z.output<typeof liveFrameSchema>;

/** `event: state`: sent when a stream opens and whenever the control changes. */
export const liveStateSchema = z.object({ person: livePersonSchema });
export type LiveState = z.output<typeof liveStateSchema>;

/** `event: blocked`: the origin fence refused a navigation or a popup of the page while it was watched. */
export const liveBlockedSchema = z.object({ navigations: z.number().int(), popups: z.number().int() });
export type LiveBlocked = z.output<typeof liveBlockedSchema>;

/**
 * `event: dialog`: the current tab's open dialog, which a screencast never paints (it lives outside
 * the page) — sent when a watched page opens one, when it is answered (`null`), when another tab
 * becomes current, and to a viewer who comes while one is open. Its text is clipped as the agent's
 * observation clips it, the run's declared secrets struck.
 */
export const liveDialogSchema = z.object({
  dialog: z
    .object({
      type: z.enum(['alert', 'confirm', 'prompt', 'beforeunload']),
      message: z.string(),
      default_value: z.string().optional(),
      /** The page that opened it. */
      url: z.string(),
    })
    .nullable(),
});
export type LiveDialog = z.output<typeof liveDialogSchema>;

export type LiveEvent =
  | { event: 'frame'; data: LiveFrame }
  | { event: 'state'; data: LiveState }
  | { event: 'blocked'; data: LiveBlocked }
  | { event: 'dialog'; data: LiveDialog };
