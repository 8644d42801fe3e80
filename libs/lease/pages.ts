import type {
  Box,
  Capture,
  CurrentTab,
  OperationLimits,
  PageDownload,
  UploadPayload,
} from '../browser/index.js';
import type { OpenedSecret, PageArtifacts, PersonInputEvent } from '../contracts/index.js';

/**
 * The page under one lease, as the lease rules use it. Effects (navigate, act) call
 * `beforeDispatch` right before anything reaches the page, and not at all when they refuse
 * before dispatch; a throw from it stops the effect unsent. That is where the action sequence is
 * fenced and advanced (DESIGN §5).
 */
export interface PageSession {
  navigate(url: string, limits: OperationLimits, beforeDispatch: () => Promise<void>): Promise<PageResult>;
  observe(args: Record<string, unknown>, limits: OperationLimits): Promise<PageResult>;
  /** `upload`: the run's file an `upload` act names, with its bytes (DESIGN §12). */
  act(
    args: Record<string, unknown>,
    limits: OperationLimits,
    beforeDispatch: () => Promise<void>,
    upload?: UploadPayload,
  ): Promise<PageResult>;
  /**
   * Where the element of an observed revision is, to outline it on a screenshot
   * (approval cards); undefined when it cannot be shown (a dialog holds the page). Not an effect;
   * the page is left as it was. Optional: a page without it answers no preview.
   */
  previewTarget?(
    args: { revision: string; element: string },
    limits: OperationLimits,
  ): Promise<Box | undefined>;
  /**
   * The viewport as it is now, `outline` drawn over it when given: taken after a call answered,
   * before the next call on the lease (DESIGN §12). Never throws: a failure is the capture's
   * reason. Optional: a page without it answers no screenshots.
   */
  screenshot?(options: { timeoutMs: number; outline?: Box | undefined }): Promise<Capture>;
  /**
   * DESIGN §12: the declared secrets of the run the lease serves, told before its first call: a
   * fill may name them, every answer has them struck. A page without it serves no secrets (a fill
   * naming one is then refused by the lease rules).
   */
  useSecrets?(secrets: readonly OpenedSecret[]): void;
  /**
   * The lease's current tab, for the live view's screencast. Optional: a page without it shows no
   * live view.
   */
  currentTab?(): CurrentTab;
  /** A person's input on the current tab (person control); contents never logged. */
  personInput?(events: readonly PersonInputEvent[], limits: OperationLimits): Promise<void>;
  /** Navigations and popups the origin fence refused so far (the live view shows a new refusal). */
  blocked?(): { navigation: number; popup: number };
  /**
   * Tells `listener` each download the lease's pages start from now on (DESIGN §12: kept under
   * the run). Optional: a page without it keeps no downloads.
   */
  onDownload?(listener: (download: PageDownload) => void): void;
  /** Playwright storage state (cookies and local storage) to seal into the profile. */
  storageState(): Promise<unknown>;
  /** Closes the browser context; afterwards the pages are gone. */
  dispose(): Promise<void>;
}

/**
 * What a page call answers: the model-facing observation, the evidence key for the platform, and
 * after navigate and act the name of the settled page's screenshot, which the lease
 * rules take right after the answer.
 */
export interface PageResult {
  observation: unknown;
  evidenceKey?: string;
  artifacts?: PageArtifacts;
}

export interface PageFactory {
  /** One browser context (and its page) per lease, created from the profile's sealed state. */
  open(input: {
    profileId: string;
    allowedOrigins: readonly string[];
    /** Origins child frames may load besides the allowed ones; none unless given. */
    frameOrigins?: readonly string[];
    /** `allowed_origins` restricts subresources to allowed ∪ frame origins; `any` unless given. */
    subresources?: 'any' | 'allowed_origins';
    storageState: unknown;
  }): Promise<PageSession>;
  /** Contexts this factory holds open now (metrics and tests). */
  openContexts(): number;
}
