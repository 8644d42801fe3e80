import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import {
  ApiError,
  type ApiKeyIdentity,
  changeProfileSchema,
  createProfileSchema,
  profileIdSchema,
} from '../../../libs/contracts/index.js';
import {
  createdProfileSchema,
  profileListSchema,
  restProfileViewSchema,
} from '../../../libs/contracts/rest-views.js';
import { refusedProfileOrigin } from '../../../libs/egress/index.js';
import type { ProfileSettings } from '../../../libs/lease/index.js';
import { authenticate, identityOf } from '../auth.js';
import { answers, BODY_FAILURES, namedBody } from './openapi.js';
import { typed, type V1Dependencies } from './shared.js';

const createProfileBodySchema = namedBody(
  createProfileSchema.omit({ tenant: true, principal: true }),
  'CreateProfile',
  { id: 'shop', allowed_origins: ['https://shop.example'] },
);

const changeProfileBodySchema = namedBody(changeProfileSchema, 'ChangeProfile', {
  allowed_origins: ['https://shop.example', 'https://checkout.shop.example'],
});

const profileParams = z.object({ id: profileIdSchema });

/** A profile as the REST API shows it to its tenant: settings, never the sealed state. */
function restProfileView(profile: ProfileSettings, lastSignedIn: LastSignedIn = null) {
  return {
    id: profile.id,
    allowed_origins: profile.allowedOrigins,
    frame_origins: profile.frameOrigins,
    subresources: profile.subresources,
    protected: profile.protected,
    sealed: profile.sealedAtMs !== undefined,
    seal_fault: profile.sealFault ?? null,
    last_signed_in: lastSignedIn,
  };
}

type LastSignedIn = { at_ms: number; by: string } | null;

/** Website profiles (DESIGN §3): a tenant's own, by id; never another tenant's, never a seal. */
export function registerProfileRoutes(root: FastifyInstance, deps: V1Dependencies): void {
  const app = typed(root);
  const { store } = deps;

  app.post(
    '/v1/profiles',
    {
      schema: {
        tags: ['profiles'],
        operationId: 'createProfile',
        summary: 'Create a website profile: the origins its runs may visit',
        body: createProfileBodySchema,
        response: answers({ 201: createdProfileSchema }, 409, ...BODY_FAILURES),
      },
      preHandler: authenticate(store, 'admin'),
    },
    async (request, reply) => {
      const identity = identityOf(request);
      const profile = createProfileSchema.parse({
        ...request.body,
        tenant: identity.tenant,
        principal: identity.principal,
      });
      // DESIGN §12: a refused address in any spelling, or a localhost name, is refused now; other
      // names are judged at each connection by the browser worker's egress proxy.
      const refused = refusedProfileOrigin(
        { allowed_origins: profile.allowed_origins, frame_origins: profile.frame_origins },
        deps.egress,
      );
      if (refused) throw new ApiError('validation_failed', refused.message);
      if (!(await deps.profiles.createProfile(profile, Date.now())))
        throw new ApiError('conflict', `profile ${profile.id} exists already`);
      return reply.code(201).send({ ...profile, sealed: false, seal_fault: null, last_signed_in: null });
    },
  );
  app.get(
    '/v1/profiles',
    {
      schema: {
        tags: ['profiles'],
        operationId: 'listProfiles',
        summary: "The tenant's profiles",
        response: answers({ 200: profileListSchema }),
      },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request) => {
      // The tenant's own index alone, never another tenant's records or any seal.
      const tenant = identityOf(request).tenant;
      const profiles = await deps.profiles.listProfiles(tenant);
      const signedIn =
        (await deps.profileSignIns?.records.lastSignedIn(
          profiles.map((profile) => ({ tenant, id: profile.id })),
        )) ?? [];
      return {
        profiles: profiles.map((profile, index) => restProfileView(profile, signedIn[index] ?? null)),
      };
    },
  );
  app.get(
    '/v1/profiles/:id',
    {
      schema: {
        tags: ['profiles'],
        operationId: 'getProfile',
        summary: 'A profile: its settings, never its sealed state',
        params: z.object({ id: profileIdSchema }),
        response: answers({ 200: restProfileViewSchema }, 404, 422),
      },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request) => {
      // Ids are unique within a tenant: another tenant's profile of this id is simply not this one.
      const profile = await deps.profiles.profileSettings({
        tenant: identityOf(request).tenant,
        id: request.params.id,
      });
      if (!profile) throw new ApiError('not_found', `profile ${request.params.id} not found`);
      const [signedIn] = (await deps.profileSignIns?.records.lastSignedIn([
        { tenant: profile.tenant, id: profile.id },
      ])) ?? [null];
      return restProfileView(profile, signedIn ?? null);
    },
  );
  app.patch(
    '/v1/profiles/:id',
    {
      schema: {
        tags: ['profiles'],
        operationId: 'changeProfile',
        summary: "Change a profile's settings; leases acquired after the change use them",
        description:
          "The settings given replace the profile's; the others stay. A lease live now keeps the settings it was acquired with. An admin key, or a key of the profile's principal.",
        params: profileParams,
        body: changeProfileBodySchema,
        response: answers({ 200: restProfileViewSchema }, 403, 404, ...BODY_FAILURES),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request) => {
      const identity = identityOf(request);
      const ref = { tenant: identity.tenant, id: request.params.id };
      await requireProfileOwner(deps, identity, ref);
      // The same guard as at creation: a changed list is judged whole, as a new one would be.
      const refused = refusedProfileOrigin(
        {
          ...(request.body.allowed_origins ? { allowed_origins: request.body.allowed_origins } : {}),
          ...(request.body.frame_origins ? { frame_origins: request.body.frame_origins } : {}),
        },
        deps.egress,
      );
      if (refused) throw new ApiError('validation_failed', refused.message);
      const changed = await deps.profiles.updateProfile(ref, request.body, Date.now());
      if (!changed) throw new ApiError('not_found', `profile ${ref.id} not found`);
      return restProfileView(changed);
    },
  );
  app.delete(
    '/v1/profiles/:id',
    {
      schema: {
        tags: ['profiles'],
        operationId: 'deleteProfile',
        summary: 'Delete a profile and its sealed state',
        description:
          "Refused 409, naming the run, while a run that has not ended is bound to the profile, holds its lease or waits for it. An admin key, or a key of the profile's principal.",
        params: profileParams,
        response: answers({ 204: z.undefined() }, 403, 404, 409, 422),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request, reply) => {
      const identity = identityOf(request);
      const ref = { tenant: identity.tenant, id: request.params.id };
      await requireProfileOwner(deps, identity, ref);
      // Runs queued and not yet claimed are in no line: they are found among the active runs.
      const active = await store.activeRunOnProfile(ref.tenant, ref.id);
      if (active) throw profileInUse(ref.id, active);
      const outcome = await deps.profiles.deleteProfile(ref);
      if (outcome.status === 'not_found') throw new ApiError('not_found', `profile ${ref.id} not found`);
      if (outcome.status === 'held') throw profileInUse(ref.id, outcome.runId);
      return reply.code(204).send();
    },
  );
}

function profileInUse(profileId: string, runId: string): ApiError {
  return new ApiError(
    'conflict',
    `profile ${profileId} is in use by run ${runId}; delete it once that run has ended`,
  );
}

/**
 * A profile is changed by an admin key or a key of the principal that made it; any other key of the
 * tenant reads it but may not change it (403). Another tenant's profile of this id is not this one (404).
 */
async function requireProfileOwner(
  deps: V1Dependencies,
  identity: ApiKeyIdentity,
  ref: { tenant: string; id: string },
): Promise<void> {
  const profile = await deps.profiles.profileSettings(ref);
  if (!profile) throw new ApiError('not_found', `profile ${ref.id} not found`);
  if (!identity.scopes.includes('admin') && profile.principal !== identity.principal)
    throw new ApiError('forbidden', `profile ${ref.id} is changed by an admin key or its principal's`);
}
