import { createHmac } from 'node:crypto';
import { type Config, decodeKey } from '../../../libs/config/index.js';
import { ApiError, type RunSecrets, runSecretsLabel } from '../../../libs/contracts/index.js';
import { sealState } from '../../../libs/lease/seal.js';
import type { SubmitRun } from '../../../libs/store/index.js';

/**
 * DESIGN §12 (secrets by name): a submission's declared secrets as the store keeps them — sealed
 * with the seal key (AES-256-GCM, bound to the tenant and the run's id, as profiles' states are
 * sealed) beside their names and origins — and the request as its idempotency hash reads it, each
 * value replaced by a keyed digest: a repeat with the same secrets matches, another is a conflict,
 * and the stored hash says nothing of a value to anyone without the key.
 */
export function sealedSubmission(
  config: Config,
  tenant: string,
  body: { secrets?: RunSecrets | undefined },
): { secrets?: SubmitRun['secrets']; hashed: unknown } {
  const secrets = body.secrets;
  if (secrets === undefined || Object.keys(secrets).length === 0) return { hashed: body };
  const key = config.secrets.sealKey ? decodeKey(config.secrets.sealKey) : undefined;
  if (!key)
    throw new ApiError(
      'validation_failed',
      'secrets: this API has no seal key (LEASEHOLD_SEAL_KEY) to keep them with; submit the run without secrets or set the key',
    );
  const digests = Object.fromEntries(
    Object.entries(secrets).map(([name, secret]) => [
      name,
      {
        value_hmac: createHmac('sha256', key).update(`run-secret\n${tenant}\n${secret.value}`).digest('hex'),
        origins: secret.origins,
      },
    ]),
  );
  return {
    secrets: {
      seal: (runId) => sealState(secrets, key, runSecretsLabel(tenant, runId)),
      declared: Object.entries(secrets).map(([name, secret]) => ({ name, origins: secret.origins })),
    },
    hashed: { ...body, secrets: digests },
  };
}
