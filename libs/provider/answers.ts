import { z } from 'zod';
import {
  type AcquireAnswer,
  type BrowserObservation,
  browserObservationSchema,
  type LeaseView,
  type PageArtifacts,
  type ProfileView,
  pageArtifactsSchema,
} from '../contracts/index.js';

/**
 * Schemas for the data plane's answers as the run side parses them on arrival (STYLE: types at the
 * edges). `libs/contracts` states these answers as interfaces; the `satisfies` checks keep the two
 * in step until the schemas move there.
 */
export const leaseViewSchema = z.object({
  lease_id: z.string().regex(/^lse_[A-Za-z0-9_-]{8,64}$/),
  profile_id: z.string(),
  provider_ref: z.string(),
  scope: z.object({
    tenant: z.string(),
    principal: z.string(),
    run_id: z.string(),
    attempt: z.number().int(),
  }),
  state: z.enum(['live', 'closing', 'closed']),
  acquired_at_ms: z.number().int(),
  expires_at_ms: z.number().int(),
  sequence: z.number().int().nonnegative(),
  effects: z.number().int().nonnegative(),
  close_reason: z.enum(['closed', 'expired', 'revoked']).nullable(),
  sealed: z.boolean(),
}) satisfies z.ZodType<LeaseView>;

export const acquireAnswerSchema = leaseViewSchema.extend({
  created: z.boolean(),
}) satisfies z.ZodType<AcquireAnswer>;

export const profileViewSchema = z.object({
  id: z.string(),
  tenant: z.string(),
  principal: z.string(),
  allowed_origins: z.array(z.string()),
  frame_origins: z.array(z.string()),
  subresources: z.enum(['any', 'allowed_origins']),
  protected: z.boolean(),
  sealed: z.boolean(),
  sealed_at_ms: z.number().int().nullable(),
  created_at_ms: z.number().int(),
}) satisfies z.ZodType<ProfileView>;

export const profileListSchema = z.object({ profiles: z.array(profileViewSchema) });

/** The answer of navigate, observe and act: the lease after the call and what the page showed. */
export const pageAnswerSchema = z.object({
  lease: leaseViewSchema,
  observation: browserObservationSchema,
  evidence_key: z.string().nullable(),
  /** Issue 13: after navigate and act, what the browser worker captured (names only). */
  artifacts: pageArtifactsSchema.optional(),
});

/** The answer of a preview (issue 13): the lease as it is and the outlined screenshot, if one was had. */
export const previewAnswerSchema = z.object({ lease: leaseViewSchema, artifacts: pageArtifactsSchema });

/** A page call's result inside the run side. The evidence key is for the platform, never the model. */
export interface PageCallResult {
  lease: LeaseView;
  observation: BrowserObservation;
  evidenceKey: string | null;
  /** Issue 13: the settled page's screenshot after navigate and act; empty for observe. */
  artifacts: PageArtifacts;
}
