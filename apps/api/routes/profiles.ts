import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ApiError, createProfileSchema, profileIdSchema } from '../../../libs/contracts/index.js';
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

/** A profile as the REST API shows it to its tenant: settings, never the sealed state. */
function restProfileView(profile: ProfileSettings) {
  return {
    id: profile.id,
    allowed_origins: profile.allowedOrigins,
    frame_origins: profile.frameOrigins,
    subresources: profile.subresources,
    protected: profile.protected,
    sealed: profile.sealedAtMs !== undefined,
    seal_fault: profile.sealFault ?? null,
  };
}

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
      return reply.code(201).send({ ...profile, sealed: false, seal_fault: null });
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
      // Issue 11 finding 7: the tenant's own index alone, never another tenant's records or any seal.
      const profiles = await deps.profiles.listProfiles(identityOf(request).tenant);
      return { profiles: profiles.map(restProfileView) };
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
      return restProfileView(profile);
    },
  );
}
