import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { ArtifactStore } from '../artifacts/index.js';
import type { Capture } from '../browser/index.js';
import type { LeaseScope, PageArtifacts } from '../contracts/index.js';
import type { Counter } from '../telemetry/index.js';

/**
 * Where the browser worker puts what its pages capture (issue 13): the artifact store, under the
 * lease scope's tenant and run, and a count of the captures that could not be had. A failed capture
 * or write never fails the call it follows: the answer goes without the screenshot.
 */
export interface LeaseArtifacts {
  store: ArtifactStore;
  /** `LeaseMetrics.screenshotFailures`: `stage` capture or store. */
  failures: Counter<'stage'>;
  log?: Logger;
}

/** A fresh artifact name for a JPEG screenshot (random: a name reveals nothing and never collides). */
export function screenshotName(kind: 'shot' | 'preview'): string {
  return `${kind}-${randomBytes(12).toString('base64url')}.jpg`;
}

/**
 * Stores a capture under the lease scope's run and answers its name, or nothing. The write is
 * awaited before the answer: a run records the name in its step as soon as it has the answer, and
 * anyone reading that step must find the artifact there (a local write costs a few ms; see the
 * page bench's `act_settled_with_screenshot_p50_ms`, which includes it).
 */
export async function storeCapture(
  artifacts: LeaseArtifacts | undefined,
  scope: LeaseScope,
  capture: Capture | undefined,
  kind: 'shot' | 'preview',
): Promise<PageArtifacts> {
  if (!artifacts || !capture) return {};
  if (!capture.ok) {
    artifacts.failures.inc({ stage: 'capture' });
    artifacts.log?.warn({ run_id: scope.run_id, reason: capture.reason }, 'screenshot could not be captured');
    return {};
  }
  const name = screenshotName(kind);
  try {
    await artifacts.store.put(
      { tenant: scope.tenant, runId: scope.run_id, name },
      capture.bytes,
      'image/jpeg',
    );
    return { screenshot: name };
  } catch (error) {
    artifacts.failures.inc({ stage: 'store' });
    artifacts.log?.warn({ run_id: scope.run_id, err: error }, 'screenshot could not be stored');
    return {};
  }
}
