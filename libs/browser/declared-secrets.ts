import type { ElementHandle } from 'playwright-core';
import {
  type ActArgs,
  type BrowserObservation,
  type OpenedSecret,
  type Strike,
  secretReferences,
  strike,
  strikesFor,
  withSecretValues,
} from '../contracts/index.js';
import { BrowserToolError } from './errors.js';

/**
 * A run's declared secrets in the page engine (DESIGN §12, secrets by name): a `fill` whose text
 * names one as `{{secret:NAME}}` gets its value here, at dispatch, and only into a credential field
 * of an origin the secret names — so a model talked into typing it elsewhere types nothing. Every
 * answer the engine gives has the values struck, as `[secret:NAME]`.
 */
export class DeclaredSecrets {
  #byName = new Map<string, OpenedSecret>();
  #strikes: Strike[] = [];

  /** Replaces the secrets (a lease serves one run: they are told once, before its first call). */
  use(secrets: readonly OpenedSecret[]): void {
    this.#byName = new Map(secrets.map((secret) => [secret.name, secret]));
    this.#strikes = strikesFor(
      secrets.map((secret) => ({ value: secret.value, marker: `[secret:${secret.name}]` })),
    );
  }

  get any(): boolean {
    return this.#byName.size > 0;
  }

  /**
   * The secrets an act's text names, checked before anything else: only `fill` types them, and an
   * unknown name is a bad argument (`invalid_arguments`, before dispatch).
   */
  referencedBy(args: ActArgs): OpenedSecret[] {
    const names = args.text === undefined ? [] : secretReferences(args.text);
    if (names.length === 0) return [];
    if (args.action !== 'fill')
      throw new BrowserToolError('invalid_arguments', `a secret is typed by fill only, not ${args.action}`);
    return names.map((name) => {
      const secret = this.#byName.get(name);
      if (!secret)
        throw new BrowserToolError('invalid_arguments', `no secret named ${name} is declared for this run`);
      return secret;
    });
  }

  /**
   * The fill's text with the values in, once its target is known to take them: a password,
   * one-time-code, username or email field of an origin every named secret allows. Refused
   * `secret_not_allowed` otherwise — before dispatch, so the page gets nothing.
   */
  async textFor(
    args: ActArgs,
    secrets: readonly OpenedSecret[],
    target: ElementHandle<Element>,
  ): Promise<string> {
    const text = args.text as string;
    const field = await target.evaluate(credentialFieldOf).catch(() => null);
    if (field === null || field.kind === null) {
      throw new BrowserToolError(
        'secret_not_allowed',
        `element ${args.element} is not a password, one-time-code, username or email field; a secret is typed into those only`,
      );
    }
    for (const secret of secrets) {
      if (!secret.origins.includes(field.origin))
        throw new BrowserToolError(
          'secret_not_allowed',
          `secret ${secret.name} is not for this page's origin; it names ${secret.origins.join(', ')}`,
        );
    }
    const values = new Map(secrets.map((secret) => [secret.name, secret.value]));
    return withSecretValues(text, (name) => values.get(name) ?? '');
  }

  /**
   * `text` with every declared value (and its echoed forms) struck. A `clipped` text (cut at a
   * bound) may end in the start of one: that end is struck too, from {@link PARTIAL_MIN_CHARS} on.
   */
  strikeText(text: string, clipped = false): string {
    if (this.#strikes.length === 0) return text;
    const struck = strike(text, this.#strikes);
    return clipped ? strikeCutEnd(struck, this.#strikes) : struck;
  }

  /**
   * The observation with every declared value struck from what it shows: url, title, text,
   * element names and values, the dialog. References, revisions and numbers are the platform's.
   */
  strikeObservation(observation: BrowserObservation): BrowserObservation {
    if (this.#strikes.length === 0) return observation;
    // Every string the page gave may have been cut at its bound: its end is checked as well.
    const struck = (text: string) => this.strikeText(text, true);
    return {
      ...observation,
      url: struck(observation.url),
      title: struck(observation.title),
      text: this.strikeText(observation.text, observation.text_truncated),
      elements: observation.elements.map((element) => ({
        ...element,
        name: struck(element.name),
        state: {
          ...element.state,
          ...(element.state.value !== undefined ? { value: struck(element.state.value) } : {}),
          ...(element.state.values !== undefined ? { values: element.state.values.map(struck) } : {}),
        },
      })),
      ...(observation.dialog
        ? {
            dialog: {
              ...observation.dialog,
              message: struck(observation.dialog.message),
              ...(observation.dialog.default_value !== undefined
                ? { default_value: struck(observation.dialog.default_value) }
                : {}),
            },
          }
        : {}),
    };
  }
}

/** The shortest start of a value struck at the end of a cut string: shorter ones match by chance. */
const PARTIAL_MIN_CHARS = 3;

/** `text` whose end (before a clip's `…`) is the start of a struck value: that end struck. */
function strikeCutEnd(text: string, strikes: readonly Strike[]): string {
  const ellipsis = text.endsWith('…') ? '…' : '';
  const body = ellipsis ? text.slice(0, -1) : text;
  for (const { value, marker } of strikes) {
    for (let length = Math.min(value.length - 1, body.length); length >= PARTIAL_MIN_CHARS; length -= 1) {
      if (body.endsWith(value.slice(0, length))) return `${body.slice(0, -length)}${marker}${ellipsis}`;
    }
  }
  return text;
}

/**
 * The fields a secret goes into: a password (its type, or its autocomplete), a one-time code, a
 * username or an email field. Everything else — a search box, a comment, a URL bar — is refused.
 */
export const CREDENTIAL_FIELDS_SELECTOR = [
  'input[type="password" i]',
  'input[type="email" i]',
  'input[autocomplete~="current-password" i]',
  'input[autocomplete~="new-password" i]',
  'input[autocomplete~="one-time-code" i]',
  'input[autocomplete~="username" i]',
  'input[autocomplete~="email" i]',
].join(',');

/** Runs in the page (Playwright's utility world): the element's frame origin and credential kind. */
function credentialFieldOf(element: Element): { origin: string; kind: string | null } {
  const view = element.ownerDocument.defaultView;
  // `origin` of the window: a srcdoc or about:blank frame has its parent's, as the page treats it.
  const origin = view ? view.origin : 'null';
  if (element.localName !== 'input') return { origin, kind: null };
  const input = element as HTMLInputElement;
  const type = input.type.toLowerCase();
  const tokens = (input.getAttribute('autocomplete') ?? '').toLowerCase().split(/\s+/);
  if (type === 'password' || tokens.includes('current-password') || tokens.includes('new-password'))
    return { origin, kind: 'password' };
  if (tokens.includes('one-time-code')) return { origin, kind: 'one-time-code' };
  if (tokens.includes('username')) return { origin, kind: 'username' };
  if (type === 'email' || tokens.includes('email')) return { origin, kind: 'email' };
  return { origin, kind: null };
}
