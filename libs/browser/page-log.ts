import type { BrowserContext, ConsoleMessage, Request, Response, WebError } from 'playwright-core';
import { PAGE_LOG_LIMIT, PAGE_LOG_TEXT_MAX_CHARS, type PageLog } from '../contracts/index.js';

/** A URL kept longer than this is cut (an ellipsis ends it). */
const URL_MAX_CHARS = 300;

/**
 * `url` as a page log keeps it: scheme, host and path, never its query or fragment (where a site
 * puts tokens and personal data). A URL of another scheme (data:, blob:) keeps its scheme alone.
 */
export function urlWithoutQuery(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return clip(url.replace(/[?#].*$/s, ''), URL_MAX_CHARS);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return `${parsed.protocol}…`;
  return clip(`${parsed.origin}${parsed.pathname}`, URL_MAX_CHARS);
}

/** Every http(s) URL inside a text (an error message naming a script) without its query or fragment. */
function textWithoutQueries(text: string): string {
  return text.replace(/(https?:\/\/[^\s?#"'<>()]+)[?#][^\s"'<>()]*/g, '$1');
}

function clip(text: string, maxChars: number): string {
  return text.length > maxChars ? `${text.slice(0, maxChars)}…` : text;
}

/** The call's log as it fills: bounded as it goes, so a page that logs without end costs nothing more. */
class Recording {
  readonly log: PageLog = {
    console_errors: [],
    failed_requests: [],
    console_errors_dropped: 0,
    failed_requests_dropped: 0,
  };

  constructor(private readonly strike: (text: string, clipped: boolean) => string) {}

  consoleError(text: string, url: string | null): void {
    if (this.log.console_errors.length >= PAGE_LOG_LIMIT) {
      this.log.console_errors_dropped += 1;
      return;
    }
    // Struck after the cut, the cut end checked too (a value may begin where the text was cut).
    const whole = textWithoutQueries(text);
    const cut = clip(whole, PAGE_LOG_TEXT_MAX_CHARS);
    this.log.console_errors.push({
      text: clip(this.strike(cut, cut !== whole), PAGE_LOG_TEXT_MAX_CHARS),
      url: url ? this.strike(urlWithoutQuery(url), false) : null,
    });
  }

  failedRequest(request: Request, status: number | null, failure: string | null): void {
    if (this.log.failed_requests.length >= PAGE_LOG_LIMIT) {
      this.log.failed_requests_dropped += 1;
      return;
    }
    this.log.failed_requests.push({
      method: request.method(),
      url: this.strike(urlWithoutQuery(request.url()), false),
      status,
      failure,
    });
  }
}

/**
 * What a lease's pages report while a navigate or an act runs (every tab of its context): console
 * errors, uncaught exceptions, and requests that failed or were answered 400 or more. Recorded only
 * during a call; between calls nothing is kept. For the person reading the run, never the model.
 */
export class PageLogRecorder {
  #recording: Recording | undefined;
  readonly #detach: () => void;

  /** `strike` takes a run's declared secrets out of a text (see DeclaredSecrets.strikeText). */
  constructor(
    context: BrowserContext,
    private readonly strike: (text: string, clipped: boolean) => string,
  ) {
    const onConsole = (message: ConsoleMessage) => {
      if (message.type() !== 'error') return;
      this.#recording?.consoleError(message.text(), message.location().url || null);
    };
    const onWebError = (error: WebError) => {
      const thrown = error.error();
      this.#recording?.consoleError(
        `Uncaught ${thrown.name}: ${thrown.message}`,
        error.page()?.url() ?? null,
      );
    };
    const onResponse = (response: Response) => {
      if (response.status() >= 400)
        this.#recording?.failedRequest(response.request(), response.status(), null);
    };
    const onFailed = (request: Request) => {
      this.#recording?.failedRequest(request, null, request.failure()?.errorText ?? 'failed');
    };
    context.on('console', onConsole);
    context.on('weberror', onWebError);
    context.on('response', onResponse);
    context.on('requestfailed', onFailed);
    this.#detach = () => {
      context.off('console', onConsole);
      context.off('weberror', onWebError);
      context.off('response', onResponse);
      context.off('requestfailed', onFailed);
    };
  }

  /**
   * Runs `call`, answering its outcome with what the pages reported meanwhile. Calls on one engine
   * run one at a time, so one recording is open at a time.
   */
  async during<T>(call: () => Promise<T>): Promise<{ outcome: T; log: PageLog }> {
    const recording = new Recording(this.strike);
    this.#recording = recording;
    try {
      return { outcome: await call(), log: recording.log };
    } finally {
      if (this.#recording === recording) this.#recording = undefined;
    }
  }

  close(): void {
    this.#recording = undefined;
    this.#detach();
  }
}
