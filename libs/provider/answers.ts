import {
  type BrowserObservation,
  type LeaseView,
  observeCallAnswerSchema,
  type PageArtifacts,
  pageArtifactsSchema,
} from '../contracts/index.js';

/**
 * The data plane's answers as the run side parses them on arrival (STYLE: types at the edges): the
 * very schemas the data plane serializes them through (libs/contracts/data-plane.ts), under the
 * names the run side reads them by.
 */
export {
  acquireLeaseAnswerSchema as acquireAnswerSchema,
  handoverAnswerSchema,
  leaseAnswerSchema as leaseViewSchema,
  previewCallAnswerSchema as previewAnswerSchema,
  profileAnswerSchema as profileViewSchema,
  profileListAnswerSchema as profileListSchema,
  renewalsAnswerSchema,
} from '../contracts/index.js';

/** The answer of navigate, observe and act: observe's carries no artifacts. */
export const pageAnswerSchema = observeCallAnswerSchema.extend({ artifacts: pageArtifactsSchema.optional() });

/** A page call's result inside the run side. The evidence key is for the platform, never the model. */
export interface PageCallResult {
  lease: LeaseView;
  observation: BrowserObservation;
  evidenceKey: string | null;
  /** The settled page's screenshot after navigate and act; empty for observe. */
  artifacts: PageArtifacts;
}
