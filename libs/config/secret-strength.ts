/**
 * Whether a shared secret is a real one, checked in production only: an operator who pasted a
 * placeholder, a row of spaces or a short passphrase would otherwise run a fleet whose data plane
 * and sealed profiles rest on a guessable value. A secret is its bytes: hex (`openssl rand -hex 32`)
 * or base64 / base64url (`openssl rand -base64 32`, the fleet's own), decoded strictly — text in
 * neither alphabet decodes to nothing.
 */

/** The bytes of a hex or base64 (either alphabet) secret, or undefined when it is neither. */
export function secretBytes(value: string): Buffer | undefined {
  if (/^(?:[0-9a-fA-F]{2})+$/.test(value)) return Buffer.from(value, 'hex');
  if (/^[A-Za-z0-9+/]+={0,2}$/.test(value) || /^[A-Za-z0-9_-]+$/.test(value))
    return Buffer.from(value, 'base64');
  return undefined;
}

/** What the secret's byte count must be: at least `minBytes`, or exactly `exactBytes`. */
export type SecretLength = { minBytes: number } | { exactBytes: number };

/** True when `raw` (trimmed) is a secret of `length`, not one character repeated. */
export function isStrongSecret(raw: string, length: SecretLength): boolean {
  const value = raw.trim();
  if (/^(.)\1*$/s.test(value)) return false;
  const bytes = secretBytes(value);
  if (!bytes) return false;
  // A value of one byte repeated (`AAAA…` in base64 is all zeros) is no secret either.
  if (bytes.every((byte) => byte === bytes[0])) return false;
  return 'exactBytes' in length ? bytes.length === length.exactBytes : bytes.length >= length.minBytes;
}
