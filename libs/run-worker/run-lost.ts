import { LeaseholdError } from '../contracts/index.js';
/** A run refused this worker a write: it was cancelled, reclaimed or taken over elsewhere. */
export class RunLost extends LeaseholdError<'not_owner'> {
  override readonly name = 'RunLost';
  constructor(message: string) {
    super('not_owner', message);
  }
}

/** Throws {@link RunLost} for a refused write; past it, the result is the accepted one. */
export function refusedUnlessOk<T extends { ok: boolean; message?: string }>(
  result: T,
  what: string,
): asserts result is Extract<T, { ok: true }> {
  if (!result.ok) throw new RunLost(`${what}: ${result.message ?? 'refused'}`);
}
