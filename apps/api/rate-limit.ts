import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Config } from '../../libs/config/index.js';
import { ApiError } from '../../libs/contracts/index.js';
import type { RedisClient } from '../../libs/store/redis-client.js';

/**
 * Per-key request limits, with `@fastify/rate-limit` and its Redis store, so every
 * replica counts the same key in one counter. A fixed window of `API_RATE_BURST ÷
 * API_RATE_PER_SECOND` seconds holds `API_RATE_BURST` requests: the defaults (50 a second, bursts
 * of 100) allow 100 at once, then nothing until the window's two seconds are over — 50 a second on
 * average. Past it: 429 `rate_limited` with `Retry-After` (seconds).
 *
 * Only authenticated callers are counted, by their key id (never the key): the limiter runs in
 * `preValidation`, after the API's door has resolved the key in `onRequest` and before the body
 * is validated, so requests the schema refuses count too. A request without an
 * identity — public routes (health, readiness, metrics, `/docs`), the dashboard's own gate — is
 * not limited here; failed authentication is limited per address by the door itself.
 */
export async function registerRateLimit(
  app: FastifyInstance,
  redis: RedisClient,
  config: Config,
): Promise<void> {
  const windowMs = Math.ceil((config.api.rateBurst / config.api.ratePerSecond) * 1_000);
  await app.register(rateLimit, {
    global: true,
    hook: 'preValidation',
    max: config.api.rateBurst,
    timeWindow: windowMs,
    redis,
    nameSpace: `${config.redis.keyPrefix}rate-limit:`,
    // Redis unreachable: requests go on (they meet the same Redis right after and answer for it).
    skipOnError: true,
    allowList: (request: FastifyRequest) => request.identity === undefined,
    keyGenerator: (request: FastifyRequest) => request.identity?.key_id ?? 'anonymous',
    addHeadersOnExceeding: {
      'x-ratelimit-limit': false,
      'x-ratelimit-remaining': false,
      'x-ratelimit-reset': false,
    },
    errorResponseBuilder: (_request, context) =>
      new ApiError(
        'rate_limited',
        `this API key made over ${context.max} requests in ${windowMs / 1_000} s; retry after ${context.after}`,
      ),
  });
}
