import { readFileSync } from 'node:fs';
import type { Grant } from './api.js';
import { UsageError } from './errors.js';

/**
 * Flag values parsed before anything is sent: a bad one is a {@link UsageError} (exit 2) naming
 * the flag, what it expects and what it got. The API checks the rest and answers in its own words.
 */

/** `<text>`, or `@<file>` holding it. */
export function textArgument(flag: string, text: string): string {
  if (!text.startsWith('@')) return text;
  try {
    return readFileSync(text.slice(1), 'utf8');
  } catch (error) {
    throw new UsageError(`${flag}: cannot read ${text.slice(1)}: ${(error as Error).message}`);
  }
}

/** `<json>` or `@<file>` holding JSON. */
export function jsonArgument(flag: string, text: string): unknown {
  const source = textArgument(flag, text);
  try {
    return JSON.parse(source);
  } catch (error) {
    throw new UsageError(`${flag}: expected JSON or @file, got ${(error as Error).message}`);
  }
}

export function grantArgument(text: string): Grant {
  const grant = jsonArgument('--grant', text);
  if (typeof grant !== 'object' || grant === null || Array.isArray(grant))
    throw new UsageError('--grant: expected {"duration_ms": …, "max_actions": …}');
  return grant as Grant;
}

/** A whole number of milliseconds, as commander hands it over. */
export function millisecondsArgument(flag: string, text: string): number {
  if (!/^\d{1,9}$/.test(text)) throw new UsageError(`${flag}: expected milliseconds, got "${text}"`);
  return Number(text);
}

/** Repeated flags and comma-separated lists alike: `--scope a --scope b,c`. */
export function listArgument(value: string, previous: string[] = []): string[] {
  return [
    ...previous,
    ...value
      .split(',')
      .map((part) => part.trim())
      .filter(Boolean),
  ];
}
