import { type ApprovalCard, newScreenshotName, type PageArtifacts } from '../contracts/index.js';
import type { Invocation } from '../runtime/index.js';
import type { TranscriptEntry } from '../runtime/model.js';
import { observedTarget } from '../runtime/observed-target.js';

/** Longest the preview call may take (the target found; the picture follows it). */
export const CARD_PREVIEW_BOUND_MS = 5_000;

/** Where a card's screenshot comes from: the run's lease provider (the page the act would touch). */
export interface CardPreview {
  preview(
    args: { revision: string; element: string },
    limits: { deadlineMs: number },
    screenshot?: string,
  ): Promise<PageArtifacts>;
}

/**
 * A card and the preview call that takes its picture. The card names its screenshot up front, so
 * the approval can be written while the preview runs (DESIGN §12: nothing slow in front of the
 * approval); `preview` answers whether the browser worker took that name (it never throws).
 */
export interface CardWithPreview {
  card: ApprovalCard;
  preview: () => Promise<boolean>;
}

/**
 * What an approval shows the person deciding it: the target's role and name and the
 * page's URL and title from the transcript's observation of the revision the act names (the page
 * the model saw), and the page itself with the target outlined. Each field that cannot be had is
 * null; nothing here fails the park.
 */
export async function buildApprovalCard(
  invocation: Invocation,
  transcript: () => Promise<readonly TranscriptEntry[]>,
  page: CardPreview | undefined,
  deadlineMs: number,
  /** The name of one of the run's uploaded files, for an `upload`'s card; undefined when unknown. */
  fileName?: (fileId: string) => Promise<string | undefined>,
): Promise<CardWithPreview> {
  const args = (invocation.call.args ?? {}) as Record<string, unknown>;
  const card: ApprovalCard = {
    element: null,
    action: typeof args.action === 'string' ? args.action : null,
    page_url: null,
    page_title: null,
    screenshot: null,
    screenshot_status: null,
    file: null,
  };
  const none = { card, preview: async () => false };
  const revision = typeof args.revision === 'string' ? args.revision : undefined;
  const ref = typeof args.element === 'string' ? args.element : undefined;
  if (invocation.call.name !== 'browser.act' || revision === undefined || ref === undefined) return none;
  // DESIGN §12: the person approving an upload sees which file would leave.
  if (args.action === 'upload' && typeof args.file === 'string') {
    const fileId = args.file;
    card.file = { id: fileId, name: (await fileName?.(fileId).catch(() => undefined)) ?? null };
  }
  try {
    const observed = observedTarget(await transcript(), invocation.call);
    if (observed) {
      card.page_url = observed.pageUrl;
      card.page_title = observed.pageTitle;
      card.element = observed.element;
    }
  } catch {
    // An unreadable transcript leaves the card's page fields null.
  }
  if (!page) return none;
  const name = newScreenshotName('preview');
  card.screenshot = name;
  const preview = async (): Promise<boolean> => {
    try {
      const shot = await page.preview(
        { revision, element: ref },
        { deadlineMs: Math.min(deadlineMs, Date.now() + CARD_PREVIEW_BOUND_MS) },
        name,
      );
      return shot.screenshot === name;
    } catch {
      // The page changed, the lease went or the worker is away: the card goes without its picture.
      return false;
    }
  };
  return { card, preview };
}
