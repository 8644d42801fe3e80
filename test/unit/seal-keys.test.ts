import { createCipheriv, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  keyFingerprint,
  SealKeys,
  SealOpenError,
  sealedWith,
  sealState,
  unsealState,
} from '../../libs/lease/seal.js';

const STATE = { cookies: [{ name: 'sid', value: 'signed-in' }] };

/** A blob as workers sealed it before blobs named their key: `v1.<base64 iv|tag|data>`, nothing after. */
function unnamedBlob(state: unknown, key: Buffer, label: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(label, 'utf8'));
  const data = Buffer.concat([cipher.update(JSON.stringify(state), 'utf8'), cipher.final()]);
  return `v1.${Buffer.concat([iv, cipher.getAuthTag(), data]).toString('base64')}`;
}

function openFailure(run: () => unknown): SealOpenError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(SealOpenError);
    return error as SealOpenError;
  }
  throw new Error('expected the state not to open');
}

describe('sealed state names the key that sealed it', () => {
  it('fingerprints a key by the first 16 hex digits of its SHA-256, never the key', () => {
    const key = randomBytes(32);
    const fingerprint = keyFingerprint(key);
    expect(fingerprint).toMatch(/^[0-9a-f]{16}$/);
    expect(keyFingerprint(Buffer.from(key))).toBe(fingerprint);
    expect(keyFingerprint(randomBytes(32))).not.toBe(fingerprint);
    const blob = sealState(STATE, key, 't1/shop');
    expect(sealedWith(blob)).toBe(fingerprint);
    for (const form of ['hex', 'base64', 'base64url'] as const)
      expect(blob).not.toContain(key.toString(form));
  });

  it('opens state sealed with a previous key, and only the current key seals', () => {
    const old = randomBytes(32);
    const current = randomBytes(32);
    const keys = new SealKeys(current, [old]);
    expect(unsealState(sealState(STATE, old, 't1/shop'), keys, 't1/shop')).toEqual(STATE);
    expect(unsealState(sealState(STATE, current, 't1/shop'), keys, 't1/shop')).toEqual(STATE);
    expect(keys.fingerprint).toBe(keyFingerprint(current));
    expect(keys.fingerprints).toEqual([keyFingerprint(current), keyFingerprint(old)]);
  });

  it('refuses state sealed with a key the worker does not hold as key_mismatch, naming both fingerprints', () => {
    const sealer = randomBytes(32);
    const other = randomBytes(32);
    const failure = openFailure(() =>
      unsealState(sealState(STATE, sealer, 't1/shop'), new SealKeys(other), 't1/shop'),
    );
    expect(failure.reason).toBe('key_mismatch');
    expect(failure.sealedWith).toBe(keyFingerprint(sealer));
    expect(failure.message).toContain(keyFingerprint(sealer));
    expect(failure.message).toContain(keyFingerprint(other));
  });

  it('calls state that does not open with the key that sealed it unreadable', () => {
    const key = randomBytes(32);
    const blob = sealState(STATE, key, 't1/shop');
    // Another profile's blob: the label is the additional data.
    expect(openFailure(() => unsealState(blob, key, 't1/other')).reason).toBe('unreadable');
    // One byte of the ciphertext altered.
    const [version, body, fingerprint] = blob.split('.') as [string, string, string];
    const bytes = Buffer.from(body, 'base64');
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) ^ 1;
    const damaged = `${version}.${bytes.toString('base64')}.${fingerprint}`;
    const failure = openFailure(() => unsealState(damaged, key, 't1/shop'));
    expect(failure).toMatchObject({ reason: 'unreadable', sealedWith: keyFingerprint(key) });
    expect(openFailure(() => unsealState('v9.whatever', key, 't1/shop')).reason).toBe('unreadable');
  });

  it('seals blobs that workers from before the fingerprint still open: they read the first two parts', () => {
    const key = randomBytes(32);
    const blob = sealState(STATE, key, 't1/shop');
    const [version, body] = blob.split('.', 2) as [string, string];
    expect(version).toBe('v1');
    expect(unsealState(`${version}.${body}`, key, 't1/shop')).toEqual(STATE);
  });

  it('opens state sealed before blobs named their key with any key held, and calls it unreadable with none', () => {
    const old = randomBytes(32);
    const blob = unnamedBlob(STATE, old, 't1/shop');
    expect(sealedWith(blob)).toBeUndefined();
    expect(unsealState(blob, new SealKeys(randomBytes(32), [old]), 't1/shop')).toEqual(STATE);
    expect(unsealState(blob, old, 't1/shop')).toEqual(STATE);
    const failure = openFailure(() => unsealState(blob, new SealKeys(randomBytes(32)), 't1/shop'));
    expect(failure).toMatchObject({ reason: 'unreadable', sealedWith: undefined });
  });
});
