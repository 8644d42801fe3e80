import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';

/** Compares bearer tokens in constant time (hashing first makes the lengths equal). */
export function tokenMatches(presented: string, expected: string): boolean {
  const a = createHash('sha256').update(presented).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/** Whether `request` carries `Authorization: Bearer <token>` with exactly the data-plane token. */
export function presentsToken(request: FastifyRequest, token: string): boolean {
  const header = request.headers.authorization ?? '';
  const presented = header.startsWith('Bearer ') ? header.slice('Bearer '.length) : '';
  return presented.length > 0 && tokenMatches(presented, token);
}
