import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Encrypts a profile's storage state at rest with AES-256-GCM. The profile's `tenant/id` label is
 * the additional data, so a blob copied onto another profile — another tenant's of the same id
 * included — does not decrypt. Format: `v1.<base64 iv|tag|data>`.
 */
export function sealState(state: unknown, key: Buffer, profileLabel: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(profileLabel, 'utf8'));
  const data = Buffer.concat([cipher.update(JSON.stringify(state), 'utf8'), cipher.final()]);
  return `${VERSION}.${Buffer.concat([iv, cipher.getAuthTag(), data]).toString('base64')}`;
}

/** The storage state sealed by {@link sealState}; throws if the blob was altered or the key differs. */
export function unsealState(blob: string, key: Buffer, profileLabel: string): unknown {
  const [version, body] = blob.split('.', 2);
  if (version !== VERSION || !body) throw new Error('sealed state of an unknown format');
  const bytes = Buffer.from(body, 'base64');
  const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES));
  decipher.setAAD(Buffer.from(profileLabel, 'utf8'));
  decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  const plain = Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]);
  return JSON.parse(plain.toString('utf8'));
}
