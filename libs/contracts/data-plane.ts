import { z } from 'zod';
import { BROWSER_TOOLS_COMPATIBLE_VERSIONS, browserObservationSchema } from './browser-tools.js';
import { pageArtifactsSchema } from './run-steps.js';
import { tenantIdSchema } from './runs.js';

/**
 * The browser worker's data plane (DESIGN §5): profiles, leases and the lease-scoped page routes.
 * Every body crossing it is parsed by one of these schemas on arrival.
 */

/** A profile id: chosen by its creator, unique within its tenant, safe in Redis keys, URLs and pin lists. */
export const profileIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ or -, at most 64');
const principalSchema = z
  .string()
  .regex(/^[A-Za-z0-9_.@-]{1,128}$/, 'letters, digits, _ . @ or -, at most 128');

/**
 * A profile names itself within its tenant (DESIGN §3): two tenants may both have a profile `shop`.
 * Everything that names a profile — data-plane paths, Redis keys, pins, leases — carries both.
 */
export interface ProfileRef {
  readonly tenant: string;
  readonly id: string;
}

/** `tenant/id`: a profile's name across tenants (pins, logs, the seal's additional data). */
export function profileLabel(profile: ProfileRef): string {
  return `${profile.tenant}/${profile.id}`;
}

/**
 * Whether a browser worker's pins serve `profile`: `*` serves every profile, a pin `tenant/*` every
 * profile of that tenant, a pin `tenant/id` that one profile.
 */
export function pinsServe(pins: '*' | readonly string[], profile: ProfileRef): boolean {
  return pinRank(pins, profile) > 0;
}

/**
 * How closely `pins` name `profile`: 3 by tenant and id, 2 by `tenant/*`, 1 by `*`, 0 not at all.
 * The run side prefers the worker that names a profile most closely.
 */
export function pinRank(pins: '*' | readonly string[], profile: ProfileRef): number {
  if (pins === '*') return 1;
  if (pins.includes(profileLabel(profile))) return 3;
  if (pins.includes(`${profile.tenant}/*`)) return 2;
  return pins.includes('*') ? 1 : 0;
}

/** At most 64 allowed origins per profile (normalised `scheme://host[:port]`), and as many frame origins. */
export const MAX_PROFILE_ORIGINS = 64;

/**
 * `scheme://host[:port]` of an http(s) URL or origin, lower-cased, default port dropped; undefined
 * for anything else (paths, queries and credentials are not part of an origin).
 */
export function normaliseOrigin(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  if (url.username || url.password) return undefined;
  if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) return undefined;
  return url.origin;
}

/** A list of at most 64 http(s) origins, normalised, deduplicated and sorted. */
const originListSchema = z
  .array(z.string().max(2_048))
  .max(MAX_PROFILE_ORIGINS)
  .transform((origins, context) => {
    const normalised = new Set<string>();
    for (const [index, origin] of origins.entries()) {
      const value = normaliseOrigin(origin);
      if (value === undefined) {
        context.addIssue({
          code: 'custom',
          path: [index],
          message: 'an http(s) origin such as https://example.com',
        });
        return z.NEVER;
      }
      normalised.add(value);
    }
    return [...normalised].sort();
  });

/**
 * What a lease's pages may load besides their top-level documents: `any` (real sites
 * load from CDNs) or `allowed_origins` (only `allowed_origins` ∪ `frame_origins`).
 */
export const subresourcePolicySchema = z.enum(['any', 'allowed_origins']);
export type SubresourcePolicy = z.output<typeof subresourcePolicySchema>;

export const createProfileSchema = z.object({
  id: profileIdSchema,
  tenant: tenantIdSchema,
  /** The principal that owns the profile; a protected profile is leased to it alone. */
  principal: principalSchema,
  allowed_origins: z.array(z.string().max(2_048)).min(1).max(MAX_PROFILE_ORIGINS).pipe(originListSchema),
  /** Origins child frames may load besides `allowed_origins` (payment or sign-in embeds). */
  frame_origins: originListSchema.default([]),
  subresources: subresourcePolicySchema.default('any'),
  protected: z.boolean().default(false),
});
export type CreateProfile = z.output<typeof createProfileSchema>;

/**
 * Why the profile's sealed state last failed to open, and on which browser worker: a key the worker
 * does not hold, or state that does not open with the key that sealed it. Cleared once the state
 * opens or is sealed again. No reset is offered: one misconfigured worker must not lead anyone to
 * drop state the others still open.
 */
export const sealFaultSchema = z.object({
  code: z.enum(['seal_key_mismatch', 'profile_unreadable']),
  message: z.string(),
  worker_id: z.string(),
  at_ms: z.number().int(),
});
export type SealFault = z.output<typeof sealFaultSchema>;

/**
 * A change of a profile's settings: the fields given replace the profile's, the others stay. Its
 * id, tenant and principal never change.
 */
export const changeProfileSchema = z
  .strictObject({
    allowed_origins: z
      .array(z.string().max(2_048))
      .min(1)
      .max(MAX_PROFILE_ORIGINS)
      .pipe(originListSchema)
      .optional(),
    frame_origins: originListSchema.optional(),
    subresources: subresourcePolicySchema.optional(),
    protected: z.boolean().optional(),
  })
  .refine((change) => Object.keys(change).length > 0, { message: 'name at least one setting to change' });
export type ChangeProfile = z.output<typeof changeProfileSchema>;

/** A profile as routes show it: never its sealed state. */
export interface ProfileView {
  id: string;
  tenant: string;
  principal: string;
  allowed_origins: string[];
  frame_origins: string[];
  subresources: SubresourcePolicy;
  protected: boolean;
  sealed: boolean;
  sealed_at_ms: number | null;
  seal_fault: SealFault | null;
  created_at_ms: number;
}

/** Who holds a lease, for what (ADR-0127 d1): a repeated acquire with this same scope reattaches. */
export const leaseScopeSchema = z.object({
  tenant: tenantIdSchema,
  principal: principalSchema,
  run_id: z.string().regex(/^[A-Za-z0-9_-]{1,80}$/),
  attempt: z.number().int().min(1).max(1_000_000),
});
export type LeaseScope = z.output<typeof leaseScopeSchema>;

export const acquireLeaseSchema = leaseScopeSchema.extend({
  /** The horizon the run asks for (epoch ms); the service grants at most 15 minutes of it. */
  requested_expires_at_ms: z.number().int().positive(),
});
export type AcquireLease = z.output<typeof acquireLeaseSchema>;

/** A lease id: `lse_` and 8 to 64 letters, digits, `_` or `-`. */
export const leaseIdSchema = z
  .string()
  .regex(/^lse_[A-Za-z0-9_-]{8,64}$/, 'lse_ and 8 to 64 letters, digits, _ or -');

export const renewLeaseSchema = z.object({ requested_expires_at_ms: z.number().int().positive() });

/** An `Idempotency-Key` as the data plane takes it: 1 to 128 letters, digits, `_ . : -`. */
export const idempotencyKeySchema = z
  .string()
  .regex(/^[A-Za-z0-9_.:-]{1,128}$/, '1 to 128 letters, digits, _ . : or -');

/**
 * The most renewals one `POST /v1/renewals` carries. Sized so a full batch of the longest
 * items stays well under the 64 KiB body ceiling, and a run worker's upkeep of 10,000 leases on one
 * browser worker is under a hundred requests.
 */
export const MAX_RENEWALS_PER_REQUEST = 150;

/**
 * One renewal of a batch: the lease (its profile's tenant and id, and its id), the body the single
 * renew route takes, and the Idempotency-Key that route would carry. The key is the single route's:
 * the same renewal sent alone or in a batch replays the other's answer.
 */
export const renewalItemSchema = renewLeaseSchema.extend({
  tenant: tenantIdSchema,
  profile_id: profileIdSchema,
  lease_id: leaseIdSchema,
  idempotency_key: idempotencyKeySchema,
});
export type RenewalItem = z.output<typeof renewalItemSchema>;

/** Many renewals of leases served by one browser worker; no key twice for one profile. */
export const renewalsSchema = z.object({
  renewals: z
    .array(renewalItemSchema)
    .min(1)
    .max(MAX_RENEWALS_PER_REQUEST)
    .superRefine((items, context) => {
      const seen = new Set<string>();
      for (const [index, item] of items.entries()) {
        const key = `${item.tenant}/${item.profile_id}\n${item.idempotency_key}`;
        if (seen.has(key))
          context.addIssue({
            code: 'custom',
            path: [index, 'idempotency_key'],
            message: 'used by an earlier renewal of the same profile',
          });
        seen.add(key);
      }
    }),
});
export type Renewals = z.output<typeof renewalsSchema>;
export const closeLeaseSchema = z.object({ seal: z.boolean() });

export const navigateSchema = z.object({
  sequence: z.number().int().min(1),
  url: z.string().min(1).max(8_192),
  deadline_ms: z.number().int().min(1).max(120_000).default(30_000),
});
/**
 * A run's next owner asks what became of the effect its last owner sent on this lease with
 * `sequence` and never had answered (a stop's hand-over, a lapsed job lock).
 */
export const handoverSchema = z.object({
  sequence: z.number().int().min(1),
});
export const observeSchema = z.object({
  deadline_ms: z.number().int().min(1).max(120_000).default(30_000),
  /** The page engine's own arguments (contract 1.2.0: continuation or wait_for). */
  args: z.record(z.string(), z.unknown()).default({}),
});
export const actSchema = z.object({
  sequence: z.number().int().min(1),
  deadline_ms: z.number().int().min(1).max(120_000).default(30_000),
  /** The page engine's own arguments (contract 1.2.0: revision, element, action, text?, postcondition?). */
  args: z.record(z.string(), z.unknown()),
});

export type LeaseState = 'live' | 'closing' | 'closed';
export type LeaseCloseReason = 'closed' | 'expired' | 'revoked';

/** A lease as the data plane answers it. `provider_ref` names the browser worker that serves it. */
export interface LeaseView {
  lease_id: string;
  profile_id: string;
  provider_ref: string;
  scope: LeaseScope;
  state: LeaseState;
  acquired_at_ms: number;
  expires_at_ms: number;
  /** The last applied action's sequence number; the next navigate or act carries this + 1. */
  sequence: number;
  /** Effects applied on this lease (navigations and dispatched actions), for "no duplicate effect". */
  effects: number;
  close_reason: LeaseCloseReason | null;
  sealed: boolean;
}

export interface AcquireAnswer extends LeaseView {
  /** `false` for a reattach: the same lease, with its current expiry and sequence. */
  created: boolean;
}

/** The data-plane error codes beyond the tool codes of DESIGN §8. */
export const DATA_PLANE_ERROR_STATUS = {
  unauthorized: 401,
  not_found: 404,
  profile_unavailable: 409,
  lease_expired: 409,
  sequence_mismatch: 409,
  idempotency_conflict: 409,
  idempotency_in_progress: 409,
  conflict: 409,
  payload_too_large: 413,
  invalid_arguments: 422,
  validation_failed: 422,
  page_changed: 409,
  element_not_found: 409,
  action_not_allowed: 409,
  url_disallowed: 409,
  /** The navigation's request never reached a server: the site is not there for the worker. */
  navigation_failed: 502,
  secret_not_allowed: 409,
  /** A person holds the lease's page: the agent's page calls are refused before dispatch. */
  person_in_control: 409,
  /** Person input or a control's end from someone who does not hold the page. */
  person_not_in_control: 409,
  /** A person's input past its rate bound. */
  rate_limited: 429,
  /** The profile's sealed state names a key this worker does not hold; no retry opens it. */
  seal_key_mismatch: 409,
  /** The profile's sealed state does not open with the key that sealed it. */
  profile_unreadable: 409,
  outcome_unknown: 502,
  provider_unavailable: 503,
  internal: 500,
} as const satisfies Record<string, number>;
export type DataPlaneErrorCode = keyof typeof DATA_PLANE_ERROR_STATUS;

// ---- answers -----------------------------------------------------------------------
// What the data plane answers, as schemas: its routes serialize their answers through them (a field
// a schema lacks does not leave) and its OpenAPI document is generated from them. The `satisfies`
// checks keep them in step with the interfaces above.

export const profileAnswerSchema = z.object({
  id: z.string(),
  tenant: z.string(),
  principal: z.string(),
  allowed_origins: z.array(z.string()),
  frame_origins: z.array(z.string()),
  subresources: subresourcePolicySchema,
  protected: z.boolean(),
  /** Whether a close has stored the profile's storage state; the state itself is never shown. */
  sealed: z.boolean(),
  sealed_at_ms: z.number().int().nullable(),
  /** Why the sealed state last failed to open, and where; null while it opens. */
  seal_fault: sealFaultSchema.nullable(),
  created_at_ms: z.number().int(),
}) satisfies z.ZodType<ProfileView>;

export const profileListAnswerSchema = z.object({ profiles: z.array(profileAnswerSchema) });

export const leaseAnswerSchema = z.object({
  lease_id: leaseIdSchema,
  profile_id: z.string(),
  /** The browser worker that serves the lease. */
  provider_ref: z.string(),
  scope: leaseScopeSchema,
  state: z.enum(['live', 'closing', 'closed']),
  acquired_at_ms: z.number().int(),
  expires_at_ms: z.number().int(),
  /** The last applied action's sequence number; the next navigate or act carries this + 1. */
  sequence: z.number().int().nonnegative(),
  /** Effects applied on this lease (navigations and dispatched actions). */
  effects: z.number().int().nonnegative(),
  close_reason: z.enum(['closed', 'expired', 'revoked']).nullable(),
  sealed: z.boolean(),
}) satisfies z.ZodType<LeaseView>;

export const acquireLeaseAnswerSchema = leaseAnswerSchema.extend({
  /** `false` for a reattach: the same lease, with its current expiry and sequence. */
  created: z.boolean(),
}) satisfies z.ZodType<AcquireAnswer>;

/** Observe's answer: the lease after the call, the observation, and the evidence key (the platform's, never the model's). */
export const observeCallAnswerSchema = z.object({
  lease: leaseAnswerSchema,
  observation: browserObservationSchema,
  evidence_key: z.string().nullable(),
});

/** Navigate's and act's answer: observe's, and what the worker captured of the settled page (names only). */
export const pageCallAnswerSchema = observeCallAnswerSchema.extend({ artifacts: pageArtifactsSchema });

/**
 * What became of a handed-over effect: `applied` (it ran and answered), `refused` (dispatched,
 * then refused by the page, with its `code`), `not_applied` (it never reached the lease, whose
 * sequence is now past it, so a late copy is refused), or `unknown`.
 */
export const HANDED_OVER_CALLS = ['applied', 'refused', 'not_applied', 'unknown'] as const;
export type HandedOverCall = (typeof HANDED_OVER_CALLS)[number];
export const handoverAnswerSchema = z.object({
  lease: leaseAnswerSchema,
  call: z.enum(HANDED_OVER_CALLS),
  code: z.string().nullable(),
});
export type HandoverAnswer = z.output<typeof handoverAnswerSchema>;

/** A preview's answer: the lease as it is and the outlined screenshot, if one was had. */
export const previewCallAnswerSchema = z.object({ lease: leaseAnswerSchema, artifacts: pageArtifactsSchema });

/**
 * `POST /v1/renewals` answers each renewal as the single renew route answers it: its
 * status, and the lease (2xx) or the error (otherwise), replayed or not. In the order sent.
 */
export const renewalsAnswerSchema = z.object({
  renewals: z.array(
    z.object({
      lease_id: z.string(),
      idempotency_key: z.string(),
      /** The HTTP status the single renew route answers (or answered: `replayed`) this renewal. */
      status: z.number().int(),
      /** True when this is the stored answer of an earlier request with the same key. */
      replayed: z.boolean(),
      lease: leaseAnswerSchema.nullable(),
      error: z
        .object({ code: z.string(), message: z.string() })
        .catchall(z.union([z.string(), z.number(), z.boolean()]))
        .nullable(),
    }),
  ),
});
export type RenewalsAnswer = z.output<typeof renewalsAnswerSchema>;

/** `GET /v1/worker`: who this browser worker is, whom it serves and which browser tools contracts it speaks. */
export const workerAnswerSchema = z.object({
  id: z.string(),
  pinned_profiles: z.union([z.literal('*'), z.array(z.string())]),
  browser_version: z.string(),
  browser_tools_contract: z.string(),
  browser_tools_compatible: z.array(z.enum(BROWSER_TOOLS_COMPATIBLE_VERSIONS)),
});

/**
 * Every code a data-plane error may carry: the data plane's own (DESIGN §8) and the framework's
 * (`bad_request` for a URL, length or content type it cannot take, `rate_limited` past the failed
 * authentication limit, `unavailable` while Redis does not answer).
 */
export const DATA_PLANE_ANSWERED_ERROR_CODES = [
  ...(Object.keys(DATA_PLANE_ERROR_STATUS) as DataPlaneErrorCode[]),
  'bad_request',
  'unavailable',
] as const;

/**
 * The data plane's error (DESIGN §8): a stable code, a message, and identifiers or numbers that
 * help the caller (`field`, `current_sequence`, `dispatched`, `holder_run_id`…), never page content.
 */
export const dataPlaneErrorSchema = z.object({
  error: z
    .object({ code: z.enum(DATA_PLANE_ANSWERED_ERROR_CODES), message: z.string() })
    .catchall(z.union([z.string(), z.number(), z.boolean()])),
  /** `navigation_failed` only: the lease after the call (its sequence advanced) and the error page it shows. */
  lease: leaseAnswerSchema.optional(),
  observation: browserObservationSchema.optional(),
  evidence_key: z.string().nullable().optional(),
});
