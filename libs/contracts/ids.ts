import { randomBytes } from 'node:crypto';
import { z } from 'zod';

const ID_ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/** Kinds of record with a Leasehold id; the kind is the id's prefix (`run_…`). */
export type IdKind = 'run' | 'ses' | 'agt' | 'prf' | 'lse' | 'apr' | 'key' | 'ten' | 'usr' | 'sch' | 'fil';

/** `kind_` followed by 20 random characters of Crockford's base32 (100 bits). */
export function newId(kind: IdKind): string {
  const bytes = randomBytes(20);
  let body = '';
  for (const byte of bytes) body += ID_ALPHABET[byte & 31];
  return `${kind}_${body}`;
}

/** A record id as it crosses a boundary: safe in Redis keys, BullMQ job ids and URLs. */
export const recordIdSchema = z
  .string()
  .regex(/^[a-z]{2,8}_[A-Za-z0-9-]{4,64}$/, 'an id such as run_0a1b2c3d');

/** Whether `id` names a schedule (`sch_…`): the holders of an upload are runs and schedules. */
export function isScheduleId(id: string): boolean {
  return id.startsWith('sch_');
}
