import type { HandedOverCall } from '../contracts/index.js';
import type { LastEffect } from './ports.js';

/** What the lease's record says of a handed-over effect, and whether the sequence must skip past it. */
export type HandoverVerdict = { call: HandedOverCall; code: string | null } | { call: 'skip' };

/**
 * A run's next owner was handed an effect its last owner sent with `carried` and never had
 * answered. Effects on a lease run one at a time, and its last owner sent nothing after that one,
 * so the lease's last sequence and the state of its last effect tell:
 * - the sequence is one short: the effect never reached the lease. A live lease must first skip
 *   past it, so a late copy of the old request is refused; a lease that is not live takes no copy.
 * - the sequence is the carried one: its recorded end says (a skip already done reads `not_applied`).
 * - anything else: the two sides disagree, and nothing can be told.
 */
export function judgeHandedOverCall(
  lease: { sequence: number; lastEffect: LastEffect | undefined },
  carried: number,
  live: boolean,
): HandoverVerdict {
  if (lease.sequence === carried - 1) return live ? { call: 'skip' } : { call: 'not_applied', code: null };
  if (lease.sequence !== carried) return { call: 'unknown', code: null };
  switch (lease.lastEffect?.state) {
    case 'applied':
      return { call: 'applied', code: null };
    case 'refused':
      return lease.lastEffect.code
        ? { call: 'refused', code: lease.lastEffect.code }
        : { call: 'unknown', code: null };
    case 'skipped':
      return { call: 'not_applied', code: null };
    default:
      // Still `dispatched` (its end never recorded: the process serving it stopped), or unknown.
      return { call: 'unknown', code: null };
  }
}
