/**
 * Issue 16: the data plane's OpenAPI 3.1 document, built from the same zod schemas its routes
 * parse with. Stub: the data-plane helper fills it in; `scripts/openapi.ts` writes it to
 * `openapi/data-plane.json`.
 */
export function dataPlaneOpenApiDocument(): Record<string, unknown> {
  return {
    openapi: '3.1.0',
    info: { title: 'Leasehold data plane', version: '1.0.0' },
    paths: {},
  };
}
