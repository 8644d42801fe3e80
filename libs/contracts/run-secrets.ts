import { z } from 'zod';

/**
 * A run's declared secrets (DESIGN §12, secrets by name): values the run may type but its model
 * never sees. The caller gives them with the run; the API seals them at rest; the model is told
 * their names and origins only and types `{{secret:NAME}}` in a `fill`; the browser worker puts the
 * value in at dispatch, only into a credential field of an origin the secret names, and strikes the
 * value from everything it answers.
 */

/** At most this many secrets a run. */
export const MAX_RUN_SECRETS = 16;
/** Bytes of one secret's value (UTF-8). */
export const SECRET_VALUE_MAX_BYTES = 1024;
/** Origins one secret may be typed on. */
export const MAX_SECRET_ORIGINS = 16;

export const secretNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ or -, at most 64');

/** `scheme://host[:port]` of an absolute http(s) URL, as the profile's origins are normalised. */
export function normalizedHttpOrigin(value: string): string | null {
  try {
    const url = new URL(value);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
    return url.origin;
  } catch {
    return null;
  }
}

const secretOriginSchema = z
  .string()
  .max(2_048)
  .transform((value, context) => {
    const origin = normalizedHttpOrigin(value);
    if (origin === null) {
      context.addIssue({ code: 'custom', message: 'an origin must be an absolute http(s) URL' });
      return z.NEVER;
    }
    return origin;
  });

export const runSecretSchema = z.strictObject({
  /** What is typed; never returned by any read, never shown to the model. */
  value: z
    .string()
    .min(1)
    .refine((value) => new TextEncoder().encode(value).length <= SECRET_VALUE_MAX_BYTES, {
      message: `a secret's value is at most ${SECRET_VALUE_MAX_BYTES} bytes`,
    }),
  /** The origins whose pages may receive it (normalised to `scheme://host[:port]`). */
  origins: z
    .array(secretOriginSchema)
    .min(1)
    .max(MAX_SECRET_ORIGINS)
    .transform((origins) => [...new Set(origins)]),
});
export type RunSecret = z.output<typeof runSecretSchema>;

/** `secrets` of a run submission: name → value and origins. */
export const runSecretsSchema = z
  .record(secretNameSchema, runSecretSchema)
  .refine((secrets) => Object.keys(secrets).length <= MAX_RUN_SECRETS, {
    message: `at most ${MAX_RUN_SECRETS} secrets`,
  });
export type RunSecrets = z.output<typeof runSecretsSchema>;

/** What the run side may know of a declared secret: its name and origins, never its value. */
export const declaredSecretSchema = z.object({
  name: secretNameSchema,
  origins: z.array(z.string()),
});
export type DeclaredSecretName = z.output<typeof declaredSecretSchema>;
export const declaredSecretsSchema = z.array(declaredSecretSchema).max(MAX_RUN_SECRETS);

/** A declared secret as the browser worker holds it to type and strike it. */
export interface OpenedSecret {
  name: string;
  value: string;
  origins: readonly string[];
}

/** The additional data a run's sealed secrets are bound to: a blob copied onto another run does not open. */
export function runSecretsLabel(tenant: string, runId: string): string {
  return `run-secrets:${tenant}/${runId}`;
}

const REFERENCE = /\{\{secret:([A-Za-z0-9_-]{1,64})\}\}/g;

/** The names `text` references as `{{secret:NAME}}`, in order of first use. */
export function secretReferences(text: string): string[] {
  return [...new Set([...text.matchAll(REFERENCE)].map((match) => match[1] as string))];
}

/** Whether `text` is nothing but secret references (what a model types into a login form). */
export function onlySecretReferences(text: string): boolean {
  return text.length > 0 && text.replace(REFERENCE, '') === '';
}

/** `text` with every `{{secret:NAME}}` replaced by the value `secretValue` gives. */
export function withSecretValues(text: string, secretValue: (name: string) => string): string {
  return text.replace(REFERENCE, (_, name: string) => secretValue(name));
}

const HTML_ESCAPES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/**
 * The forms a value takes where a page or a URL echoes it: as it is, percent-encoded (a path or
 * query), form-encoded (a GET form: spaces as `+`), and HTML-escaped (markup shown as text).
 */
export function echoedForms(value: string): string[] {
  const forms = new Set([value]);
  forms.add(encodeURIComponent(value));
  forms.add(new URLSearchParams({ v: value }).toString().slice(2));
  forms.add(encodeURI(value));
  const html = value.replace(/[&<>"']/g, (char) => HTML_ESCAPES[char] ?? char);
  forms.add(html);
  forms.add(html.replace(/&#39;/g, '&#x27;'));
  forms.delete('');
  return [...forms];
}

/** A value to strike and the marker it becomes. */
export interface Strike {
  value: string;
  marker: string;
}

/** The strikes for `values` (each in every echoed form), longest first so a value inside another is struck whole. */
export function strikesFor(values: Iterable<{ value: string; marker: string }>): Strike[] {
  const strikes = new Map<string, string>();
  for (const { value, marker } of values)
    for (const form of echoedForms(value)) if (!strikes.has(form)) strikes.set(form, marker);
  return [...strikes]
    .map(([value, marker]) => ({ value, marker }))
    .sort((a, b) => b.value.length - a.value.length);
}

/** `text` with every strike applied. */
export function strike(text: string, strikes: readonly Strike[]): string {
  let result = text;
  for (const { value, marker } of strikes)
    if (result.includes(value)) result = result.split(value).join(marker);
  return result;
}
