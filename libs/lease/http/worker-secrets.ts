import { type Config, decodeKey } from '../../config/index.js';
import { StartupError } from '../../shutdown/index.js';
import { SealKeys } from '../seal.js';

/** The two secrets a browser worker cannot serve without. */
export interface WorkerSecrets {
  /** The bearer token the run workers present to the data plane. */
  token: string;
  /**
   * The AES-256-GCM key profiles' storage states are sealed with (DESIGN §3), and the keys it
   * replaced, which still open state sealed before a rotation.
   */
  sealKeys: SealKeys;
}

/** Reads the worker's secrets from the configuration; a missing one stops start-up, saying what to set. */
export function requireWorkerSecrets(secrets: Config['secrets']): WorkerSecrets {
  const token = secrets.dataPlaneToken;
  if (!token)
    throw new StartupError(
      'LEASEHOLD_DATA_PLANE_TOKEN is unset: set it to a secret of at least 32 characters shared with the run workers',
    );
  const sealKey = secrets.sealKey ? decodeKey(secrets.sealKey) : undefined;
  if (!sealKey)
    throw new StartupError(
      'LEASEHOLD_SEAL_KEY is unset: set it to 32 random bytes as hex or base64 (openssl rand -base64 32)',
    );
  // The configuration checked each previous key already; one that does not decode is a programming error.
  const previous = secrets.previousSealKeys.map((value) => {
    const key = decodeKey(value);
    if (!key) throw new StartupError('LEASEHOLD_SEAL_KEYS_PREVIOUS: a key does not decode to 32 bytes');
    return key;
  });
  return { token, sealKeys: new SealKeys(sealKey, previous) };
}
