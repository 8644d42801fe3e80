import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import type { FastifyError, FastifyInstance } from 'fastify';
import {
  hasZodFastifySchemaValidationErrors,
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
} from 'fastify-type-provider-zod';
import { ApiError } from '../../libs/contracts/index.js';
import {
  createHttpServer,
  errorBody,
  type Logger,
  markDoor,
  sendFrameworkError,
} from '../../libs/telemetry/index.js';

/** JSON body ceiling for REST (DESIGN §5 uses the same for the data plane). */
export const BODY_LIMIT_BYTES = 64 * 1024;

/**
 * The REST server before its routes: zod schemas parse on arrival, every error leaves as
 * `{error: {code, message}}` with a stable code (never a stack trace), and the OpenAPI document
 * of the tagged routes is served at `/docs`.
 */
export async function createRestServer(logger: Logger): Promise<FastifyInstance> {
  const app = createHttpServer(logger, 'api', BODY_LIMIT_BYTES);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (hasZodFastifySchemaValidationErrors(error)) {
      const first = error.validation[0];
      const field = first?.instancePath.replace(/^\//, '').replaceAll('/', '.') || error.validationContext;
      return reply.code(422).send(errorBody('validation_failed', `${field}: ${first?.message ?? 'invalid'}`));
    }
    if (error instanceof ApiError) return reply.code(error.status).send(errorBody(error.code, error.message));
    // Fastify's own errors (body size, JSON, content type) and anything unexpected: the one shape.
    return sendFrameworkError(error, request, reply, BODY_LIMIT_BYTES);
  });

  await app.register(fastifySwagger, {
    openapi: {
      info: { title: 'Leasehold REST API', version: '1.0.0' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
    transform: jsonSchemaTransform,
    hideUntagged: true,
  });
  // The API document and its assets are public (issue 11.1): they describe routes, not records.
  await app.register(async (docs) => {
    markDoor(docs, 'public');
    await docs.register(fastifySwaggerUi, { routePrefix: '/docs' });
  });
  return app;
}
