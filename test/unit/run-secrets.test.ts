import { describe, expect, it } from 'vitest';
import { sealedSubmission } from '../../apps/api/routes/run-secrets.js';
import { DeclaredSecrets } from '../../libs/browser/declared-secrets.js';
import type { Config } from '../../libs/config/index.js';
import {
  echoedForms,
  onlySecretReferences,
  runSecretsSchema,
  secretReferences,
  strike,
  strikesFor,
  withSecretValues,
} from '../../libs/contracts/index.js';

describe('secrets by name: the rules (DESIGN §12)', () => {
  it('reads the names a fill text references and puts values in their place', () => {
    expect(secretReferences('{{secret:user}}@{{secret:pw}} {{secret:user}}')).toEqual(['user', 'pw']);
    expect(secretReferences('{{secret:bad name}} {secret:pw}')).toEqual([]);
    expect(onlySecretReferences('{{secret:pw}}')).toBe(true);
    expect(onlySecretReferences('x{{secret:pw}}')).toBe(false);
    expect(withSecretValues('{{secret:a}}-{{secret:b}}', (name) => name.toUpperCase())).toBe('A-B');
  });

  it('strikes a value in every form a URL or markup echoes it, longest first', () => {
    expect(echoedForms('a b&c')).toEqual(
      expect.arrayContaining(['a b&c', 'a%20b%26c', 'a+b%26c', 'a b&amp;c']),
    );
    const strikes = strikesFor([
      { value: 'pass', marker: '[secret:short]' },
      { value: 'password1', marker: '[secret:long]' },
    ]);
    expect(strike('password1 and pass', strikes)).toBe('[secret:long] and [secret:short]');
  });

  it('strikes the start of a value a bound cut off, from three characters on', () => {
    const secrets = new DeclaredSecrets();
    secrets.use([{ name: 'pw', value: 'Quartz-zebra', origins: ['https://a.test'] }]);
    expect(secrets.strikeText('You typed Quartz-z…', true)).toBe('You typed [secret:pw]…');
    expect(secrets.strikeText('You typed Qu', true)).toBe('You typed Qu');
    expect(secrets.strikeText('You typed Quartz-z', false)).toBe('You typed Quartz-z');
  });

  it('takes at most 16 secrets of at most 1 KiB each, names as ids, origins normalised', () => {
    const parsed = runSecretsSchema.parse({ pw: { value: 'x', origins: ['https://Shop.test:443/login'] } });
    expect(parsed).toEqual({ pw: { value: 'x', origins: ['https://shop.test'] } });
    const many = Object.fromEntries(
      Array.from({ length: 17 }, (_, index) => [`s${index}`, { value: 'x', origins: ['https://a.test'] }]),
    );
    expect(runSecretsSchema.safeParse(many).success).toBe(false);
    expect(
      runSecretsSchema.safeParse({ pw: { value: 'é'.repeat(513), origins: ['https://a.test'] } }).success,
    ).toBe(false);
    expect(runSecretsSchema.safeParse({ 'p w': { value: 'x', origins: ['https://a.test'] } }).success).toBe(
      false,
    );
    expect(runSecretsSchema.safeParse({ pw: { value: 'x', origins: ['javascript:alert(1)'] } }).success).toBe(
      false,
    );
    expect(runSecretsSchema.safeParse({ pw: { value: 'x', origins: [] } }).success).toBe(false);
  });
});

describe('a submission with secrets at the API', () => {
  const body = { input: 'Sign in', secrets: { pw: { value: 'hunter22', origins: ['https://a.test'] } } };

  it('is refused 422 validation_failed when the API has no seal key', () => {
    const config = { secrets: { sealKey: undefined } } as unknown as Config;
    expect(() => sealedSubmission(config, 't1', body)).toThrow(
      expect.objectContaining({ code: 'validation_failed', status: 422 }),
    );
  });

  it('is hashed for idempotency with keyed digests of the values, never the values', () => {
    const config = { secrets: { sealKey: 'ab'.repeat(32) } } as unknown as Config;
    const sealed = sealedSubmission(config, 't1', body);
    expect(JSON.stringify(sealed.hashed)).not.toContain('hunter22');
    expect(sealed.secrets?.declared).toEqual([{ name: 'pw', origins: ['https://a.test'] }]);
    const blob = sealed.secrets?.seal('run_1') ?? '';
    expect(blob).toMatch(/^v1\./);
    expect(blob).not.toContain('hunter22');
    // The same secrets hash the same; another value does not.
    expect(sealedSubmission(config, 't1', body).hashed).toEqual(sealed.hashed);
    const other = { ...body, secrets: { pw: { value: 'hunter23', origins: ['https://a.test'] } } };
    expect(sealedSubmission(config, 't1', other).hashed).not.toEqual(sealed.hashed);
  });
});
