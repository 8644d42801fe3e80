import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const FINGERPRINT = /^[0-9a-f]{16}$/;

/**
 * Names a seal key without giving it away: the first 16 hex digits of its SHA-256. A sealed blob
 * carries the fingerprint of the key that sealed it, so a worker holding another key can say so
 * instead of taking the failed decryption for damage or an outage.
 */
export function keyFingerprint(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}

/**
 * The keys a browser worker opens sealed state with: the current one, which alone seals, and the
 * keys it replaced (`LEASEHOLD_SEAL_KEYS_PREVIOUS`), which only open. State opened with a previous
 * key is sealed again with the current one on its lease's next clean close, so a rotation ends
 * once every profile has been closed cleanly once.
 */
export class SealKeys {
  readonly fingerprint: string;
  readonly #byFingerprint = new Map<string, Buffer>();

  constructor(
    readonly current: Buffer,
    readonly previous: readonly Buffer[] = [],
  ) {
    this.fingerprint = keyFingerprint(current);
    // The current key wins a (vanishingly unlikely) fingerprint shared with a previous one.
    for (const key of [...previous].reverse()) this.#byFingerprint.set(keyFingerprint(key), key);
    this.#byFingerprint.set(this.fingerprint, current);
  }

  /** Every fingerprint this worker can open, the current one first. */
  get fingerprints(): string[] {
    return [this.fingerprint, ...this.previous.map(keyFingerprint).filter((fp) => fp !== this.fingerprint)];
  }

  /** The key named by `fingerprint`, if this worker holds it. */
  keyFor(fingerprint: string): Buffer | undefined {
    return this.#byFingerprint.get(fingerprint);
  }

  /** Current first, then the previous keys in the order given. */
  all(): Buffer[] {
    return [this.current, ...this.previous];
  }
}

/**
 * Why sealed state did not open: `key_mismatch` when it names a key this worker does not hold
 * (`sealedWith`), `unreadable` when a key that should open it did not (damage, another profile's
 * blob, an unknown format). Messages carry fingerprints at most, never a key or the state.
 */
export class SealOpenError extends Error {
  override readonly name = 'SealOpenError';
  constructor(
    readonly reason: 'key_mismatch' | 'unreadable',
    message: string,
    /** The fingerprint the blob names, when it names one. */
    readonly sealedWith: string | undefined,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * Encrypts a profile's storage state at rest with AES-256-GCM. The profile's `tenant/id` label is
 * the additional data, so a blob copied onto another profile — another tenant's of the same id
 * included — does not decrypt. Format: `v1.<base64 iv|tag|data>.<key fingerprint>`. The fingerprint
 * comes last so that workers from before it was added, which read the first two parts alone, still
 * open the blob during a rolling update; a blob they sealed names no key, and is opened by trying
 * each key held.
 */
export function sealState(state: unknown, key: Buffer, profileLabel: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(profileLabel, 'utf8'));
  const data = Buffer.concat([cipher.update(JSON.stringify(state), 'utf8'), cipher.final()]);
  const body = Buffer.concat([iv, cipher.getAuthTag(), data]).toString('base64');
  return `${VERSION}.${body}.${keyFingerprint(key)}`;
}

/** The fingerprint a sealed blob names, or undefined for a blob sealed before blobs named their key. */
export function sealedWith(blob: string): string | undefined {
  const [version, , fingerprint] = blob.split('.');
  return version === VERSION && fingerprint && FINGERPRINT.test(fingerprint) ? fingerprint : undefined;
}

/**
 * The storage state sealed by {@link sealState}, opened with the key the blob names (or, for a
 * blob that names none, the first of `keys` that opens it). Throws {@link SealOpenError}.
 */
export function unsealState(blob: string, keys: Buffer | SealKeys, profileLabel: string): unknown {
  const ring = keys instanceof SealKeys ? keys : new SealKeys(keys);
  const [version, body, fingerprint, ...rest] = blob.split('.');
  const named = fingerprint !== undefined;
  if (version !== VERSION || !body || rest.length > 0 || (named && !FINGERPRINT.test(fingerprint)))
    throw new SealOpenError('unreadable', 'sealed state of an unknown format', undefined);
  if (named) {
    const key = ring.keyFor(fingerprint);
    if (!key)
      throw new SealOpenError(
        'key_mismatch',
        `sealed with key ${fingerprint}; this worker holds ${ring.fingerprints.join(', ')}`,
        fingerprint,
      );
    try {
      return open(body, key, profileLabel);
    } catch (error) {
      throw new SealOpenError(
        'unreadable',
        `sealed with key ${fingerprint}, which this worker holds, and does not open with it`,
        fingerprint,
        { cause: error },
      );
    }
  }
  let failure: unknown;
  for (const key of ring.all()) {
    try {
      return open(body, key, profileLabel);
    } catch (error) {
      failure = error;
    }
  }
  throw new SealOpenError(
    'unreadable',
    'sealed before blobs named their key, and opens with none of the keys this worker holds',
    undefined,
    { cause: failure },
  );
}

function open(body: string, key: Buffer, profileLabel: string): unknown {
  const bytes = Buffer.from(body, 'base64');
  const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES));
  decipher.setAAD(Buffer.from(profileLabel, 'utf8'));
  decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  const plain = Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]);
  return JSON.parse(plain.toString('utf8'));
}
