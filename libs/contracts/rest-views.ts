import { z } from 'zod';
import { profileIdSchema, sealFaultSchema, subresourcePolicySchema } from './data-plane.js';
import {
  agentVersionSchema,
  agentViewSchema,
  approvalViewSchema,
  principalIdSchema,
  runViewSchema,
  tenantIdSchema,
} from './runs.js';
import { webhookViewSchema } from './webhooks.js';

/**
 * What the REST routes answer, as schemas. Each answer is serialized through its schema
 * (a field the schema lacks never leaves) and the OpenAPI document is generated from the same ones.
 */

/**
 * DESIGN §8: `{error: {code, message}}`, the body of every failure. Loose inside: a plugin's own
 * answer may carry one more field (Bull Board's translation `key`).
 */
export const errorBodySchema = z.object({
  error: z.looseObject({
    code: z.string(),
    message: z.string(),
  }),
});

/** A profile as the REST API shows it to its tenant: settings, never the sealed state. */
export const restProfileViewSchema = z.object({
  id: profileIdSchema,
  allowed_origins: z.array(z.string()),
  frame_origins: z.array(z.string()),
  subresources: subresourcePolicySchema,
  protected: z.boolean(),
  sealed: z.boolean(),
  /** Why the sealed state last failed to open on a browser worker; null while it opens. */
  seal_fault: sealFaultSchema.nullable(),
  /** When and by whom a person last signed the profile in by hand (`POST /v1/profiles/{id}/sign-in`). */
  last_signed_in: z.object({ at_ms: z.number().int(), by: z.string() }).nullable(),
});
export type RestProfileView = z.output<typeof restProfileViewSchema>;

/** The answer to a profile's creation: its settings and who owns it. */
export const createdProfileSchema = restProfileViewSchema.extend({
  tenant: tenantIdSchema,
  principal: principalIdSchema,
});

export const profileListSchema = z.object({ profiles: z.array(restProfileViewSchema) });

/** An agent and the version a definition was stored as (a change makes a new version). */
export const agentVersionViewSchema = agentViewSchema.extend({ version: agentVersionSchema });

/** A chat model an agent may name (ops/models.yaml), with its prices in USD per million tokens. */
export const modelViewSchema = z.object({
  name: z.string(),
  provider: z.enum(['scripted', 'openai-compatible']),
  input_usd_per_mtok: z.string(),
  cached_input_usd_per_mtok: z.string(),
  output_usd_per_mtok: z.string(),
  context_window_tokens: z.number().int(),
  /** ADR-0130 d1: the most one attempt can cost; a run overshoots its cost limit by this at most. */
  worst_case_call_usd: z.string(),
});
export const modelListSchema = z.object({ default_model: z.string(), models: z.array(modelViewSchema) });

/** A run as `GET /v1/runs/{id}` answers it: with the approvals it waits on. */
export const runDetailSchema = runViewSchema.extend({ pending_approvals: z.array(approvalViewSchema) });

/** A page of runs, newest first; `next_cursor` is null on the last page. */
export const runPageSchema = z.object({ runs: z.array(runViewSchema), next_cursor: z.string().nullable() });

export const approvalListSchema = z.object({ approvals: z.array(approvalViewSchema) });

export const webhookListSchema = z.object({ webhooks: z.array(webhookViewSchema) });

/** One Server-Sent Event of a run's stream: `id:` the event id, `event:` its type, `data:` the event's JSON. */
export const runEventStreamSchema = z.string().meta({
  description:
    'Server-Sent Events: each event has `id` (usable as Last-Event-ID), `event` (its type) and `data` (a RunEvent as JSON)',
});

/** One Server-Sent Event of the tenant's stream: a status event of one of its runs. */
export const tenantEventStreamSchema = z.string().meta({
  description:
    "Server-Sent Events: each event has `event` (its type: run.submitted, run.claimed, run.failed…) and `data` (the run's event as JSON, with `run_id`); live only, no replay: the first event, `ready` (data `{}`), says the stream is subscribed; read `GET /v1/runs` after it for what came before",
});

/**
 * A person on a run's page (`POST /v1/runs/{id}/takeover`, `…/handback`): `pausing` while a
 * running run reaches its next safe point, `held` once the page is the person's, `handed_back`
 * once the run goes on. Who holds it and until when; at the hand-back, how many inputs were sent
 * (never what) and the URL the page was left at.
 */
export const personControlViewSchema = z.object({
  run_id: z.string(),
  state: z.enum(['pausing', 'held', 'handed_back']),
  holder: z.string(),
  approval_id: z.string().nullable(),
  since_ms: z.number().int().nullable(),
  until_ms: z.number().int().nullable(),
  inputs: z.number().int().nullable(),
  url: z.string().nullable(),
});
export type PersonControlView = z.output<typeof personControlViewSchema>;
