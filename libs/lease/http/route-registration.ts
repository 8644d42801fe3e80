import type { FastifyInstance, RouteHandlerMethod, RouteOptions } from 'fastify';
import { z } from 'zod';
import { PUBLIC_ROUTE } from '../../telemetry/index.js';
import { documentPath } from './openapi.js';
import { DATA_PLANE_OPERATIONS, type DataPlaneOperation } from './route-table.js';

type JsonSchema = Record<string, unknown>;

const serializationSchemas = new WeakMap<z.ZodType, JsonSchema>();

/**
 * An answer's schema as Fastify's serializer takes it (JSON Schema draft 7, no references): the
 * serializer writes only the properties the schema names, so a field the contract lacks never
 * leaves the worker.
 */
export function serializationSchema(schema: z.ZodType): JsonSchema {
  let json = serializationSchemas.get(schema);
  if (!json) {
    const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, {
      io: 'output',
      target: 'draft-7',
      unrepresentable: 'any',
    }) as JsonSchema;
    json = rest;
    serializationSchemas.set(schema, json);
  }
  return json;
}

/**
 * Registers `handler` as `operation` of the route table: its method and path, public when the
 * table says so, and its JSON answers serialized through their schemas.
 */
export function registerOperation(
  app: FastifyInstance,
  operation: DataPlaneOperation,
  handler: RouteHandlerMethod,
): void {
  const response: Record<number, JsonSchema> = {};
  for (const [status, answer] of Object.entries(operation.answers))
    if (answer.schema) response[Number(status)] = serializationSchema(answer.schema);
  app.route({
    method: operation.method,
    url: operation.url,
    ...(operation.public ? { config: PUBLIC_ROUTE } : {}),
    schema: { response },
    handler,
  });
}

/** `METHOD /path` of every registered route the route table does not document. */
export function undocumentedRoutes(routes: ReadonlyArray<Pick<RouteOptions, 'method' | 'url'>>): string[] {
  const documented = new Set(
    (Object.values(DATA_PLANE_OPERATIONS) as DataPlaneOperation[]).map(
      (operation) => `${operation.method} ${documentPath(operation.url)}`,
    ),
  );
  const missing: string[] = [];
  for (const route of routes)
    for (const method of [route.method].flat()) {
      // Fastify answers HEAD of every GET route by itself; the GET is the documented one.
      const asked = method === 'HEAD' ? 'GET' : method;
      const key = `${asked} ${documentPath(route.url)}`;
      if (!documented.has(key)) missing.push(`${method} ${route.url}`);
    }
  return missing;
}

/**
 * The data plane's document names every route it serves. A route registered without an
 * entry in the route table stops the server at start-up, as an unguarded one does.
 */
export function refuseUndocumentedRoutes(app: FastifyInstance): void {
  const routes: RouteOptions[] = [];
  app.addHook('onRoute', (route) => {
    routes.push(route);
  });
  app.addHook('onReady', async () => {
    const missing = undocumentedRoutes(routes);
    if (missing.length > 0)
      throw new Error(`routes missing from the data plane's OpenAPI document: ${missing.join('; ')}`);
  });
}
