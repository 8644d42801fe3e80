import type { TranscriptEntry } from './model.js';

/** The fields of an observation that name a page and its elements, as a transcript holds them. */
interface ObservedPage {
  revision?: unknown;
  url?: unknown;
  title?: unknown;
  elements?: unknown;
}

/** The latest successful tool result whose observation carries `revision` (as secret-args.ts reads it). */
function observationOf(transcript: readonly TranscriptEntry[], revision: string): ObservedPage | undefined {
  for (let index = transcript.length - 1; index >= 0; index -= 1) {
    const entry = transcript[index];
    if (entry?.kind !== 'tool' || !entry.outcome.ok) continue;
    const observation = (entry.outcome.result as { observation?: ObservedPage } | undefined)?.observation;
    if (observation?.revision === revision) return observation;
  }
  return undefined;
}

/** What an act names, as the page the model saw named it: the page and the element by role and name. */
export interface ObservedTarget {
  pageUrl: string | null;
  pageTitle: string | null;
  element: { role: string; name: string } | null;
}

/**
 * The page and element a `browser.act` call acts on, read from the transcript's observation of the
 * revision it names: undefined for another tool, or when that observation is not in the transcript.
 * One reading for the approval card and the step record, so both name the same element.
 */
export function observedTarget(
  transcript: readonly TranscriptEntry[],
  call: { name: string; args: unknown },
): ObservedTarget | undefined {
  const args = (call.args ?? {}) as Record<string, unknown>;
  if (call.name !== 'browser.act' || typeof args.revision !== 'string' || typeof args.element !== 'string')
    return undefined;
  const observation = observationOf(transcript, args.revision);
  if (!observation) return undefined;
  const element = Array.isArray(observation.elements)
    ? (observation.elements as Array<{ ref?: unknown; role?: unknown; name?: unknown }>).find(
        (candidate) => candidate?.ref === args.element,
      )
    : undefined;
  return {
    pageUrl: typeof observation.url === 'string' ? observation.url : null,
    pageTitle: typeof observation.title === 'string' ? observation.title : null,
    element:
      element && typeof element.role === 'string'
        ? { role: element.role, name: typeof element.name === 'string' ? element.name : '' }
        : null,
  };
}
