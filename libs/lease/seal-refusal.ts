import { type ProfileRef, profileLabel, type SealFault } from '../contracts/index.js';
import { DataPlaneError } from './errors.js';
import type { SealKeys, SealOpenError } from './seal.js';

/**
 * What a profile's sealed state that did not open on a worker is answered and noted as. That is
 * no outage and no retry helps (ADR-0177's permanent refusal): a key the worker does not hold is
 * `seal_key_mismatch`, state that does not open with the key that sealed it `profile_unreadable`.
 * The answer and the profile's note name the profile and the worker, and keys by fingerprint only.
 * Neither offers to drop the state: other workers may still open it.
 */
export function sealRefusal(input: {
  profile: ProfileRef;
  workerId: string;
  keys: SealKeys;
  error: SealOpenError;
  nowMs: number;
}): { fault: SealFault; error: DataPlaneError } {
  const { profile, workerId, keys, error } = input;
  const code = error.reason === 'key_mismatch' ? 'seal_key_mismatch' : 'profile_unreadable';
  const label = profileLabel(profile);
  const message =
    code === 'seal_key_mismatch'
      ? `profile ${label} was sealed with key ${error.sealedWith}; browser worker ${workerId} holds ${keys.fingerprints.join(', ')} (LEASEHOLD_SEAL_KEY, LEASEHOLD_SEAL_KEYS_PREVIOUS)`
      : `profile ${label}'s sealed state does not open on browser worker ${workerId}: ${error.message}`;
  const facts = {
    tenant: profile.tenant,
    profile_id: profile.id,
    worker_id: workerId,
    worker_key: keys.fingerprint,
    ...(error.sealedWith ? { sealed_with: error.sealedWith } : {}),
  };
  return {
    fault: { code, message, worker_id: workerId, at_ms: input.nowMs },
    error: new DataPlaneError(code, message, facts, { cause: error }),
  };
}
