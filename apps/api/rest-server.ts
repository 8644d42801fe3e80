import fastifyCookie from '@fastify/cookie';
import fastifyMultipart from '@fastify/multipart';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import type { FastifyError, FastifyInstance } from 'fastify';
import {
  hasZodFastifySchemaValidationErrors,
  serializerCompiler,
  validatorCompiler,
} from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ApiError, RateLimitedError } from '../../libs/contracts/index.js';
import {
  createHttpServer,
  errorBody,
  type Logger,
  markDoor,
  sendFrameworkError,
} from '../../libs/telemetry/index.js';
import { restDocumentTransform, restSchemaTransform } from './routes/openapi.js';

/** JSON body ceiling for REST (DESIGN §5 uses the same for the data plane). */
export const BODY_LIMIT_BYTES = 64 * 1024;

/**
 * The REST server before its routes: zod schemas parse on arrival, every error leaves as
 * `{error: {code, message}}` with a stable code (never a stack trace), and the OpenAPI document
 * of the tagged routes is served at `/docs`.
 */
export async function createRestServer(
  logger: Logger,
  redisUp: () => boolean = () => true,
): Promise<FastifyInstance> {
  const app = createHttpServer(logger, 'api', BODY_LIMIT_BYTES, { refuseWhileRedisDown: redisUp });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  acceptEmptyJsonBodies(app);
  // Cookies are parsed on arrival, before the doors' hook reads a run-page session from them.
  await app.register(fastifyCookie, { hook: 'onRequest' });
  // Multipart bodies (`POST /v1/files`) are read by their route as they stream in, each bounded
  // by the route's own limits; no route's body is parsed from one otherwise.
  await app.register(fastifyMultipart, { limits: { files: 1, fields: 0, parts: 1 } });
  // Every answer is taken as the type it names, never sniffed: the pages' script and style, the
  // API document's assets, Bull Board's, JSON. (Streams the routes hijack set their own headers.)
  app.addHook('onSend', async (_request, reply, payload) => {
    if (!reply.hasHeader('x-content-type-options')) reply.header('x-content-type-options', 'nosniff');
    return payload;
  });

  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (hasZodFastifySchemaValidationErrors(error)) {
      const first = error.validation[0];
      const field = first?.instancePath.replace(/^\//, '').replaceAll('/', '.') || error.validationContext;
      return reply.code(422).send(errorBody('validation_failed', `${field}: ${first?.message ?? 'invalid'}`));
    }
    if (error instanceof RateLimitedError) reply.header('retry-after', String(error.retryAfterSeconds));
    if (error instanceof ApiError) return reply.code(error.status).send(errorBody(error.code, error.message));
    // Fastify's own errors (body size, JSON, content type) and anything unexpected: the one shape.
    return sendFrameworkError(error, request, reply, BODY_LIMIT_BYTES);
  });

  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Leasehold REST API',
        version: '1.0.0',
        description:
          'Durable, budgeted browser runs for AI agents. Every request carries `Authorization: Bearer <API key>`; every failure is `{error: {code, message}}` with a stable code.',
      },
      servers: [{ url: '/', description: 'This server' }],
      components: {
        securitySchemes: {
          bearer: {
            type: 'http',
            scheme: 'bearer',
            description: 'An API key (`lhk_…`), made by `npm run api-key` or `POST /v1/api-keys`',
          },
        },
      },
      security: [{ bearer: [] }],
    },
    transform: restSchemaTransform,
    transformObject: restDocumentTransform,
    hideUntagged: true,
  });
  // The API document and its assets are public: they describe routes, not records.
  await app.register(async (docs) => {
    markDoor(docs, 'public');
    await docs.register(fastifySwaggerUi, { routePrefix: '/docs' });
  });
  return app;
}

/**
 * A body-less POST (cancel, retry; approve, whose body is optional) sent with
 * `content-type: application/json` and no body is answered as usual, not refused as an empty JSON
 * body. A route whose body is required still refuses an empty one (400), as any other bad JSON.
 */
function acceptEmptyJsonBodies(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const schema = request.routeOptions.schema?.body;
    const bodyOptional =
      schema === undefined || (schema instanceof z.ZodType && schema.safeParse(undefined).success);
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text === '' && bodyOptional) return done(null, undefined);
    return parseJson(request, text, done);
  });
}
