import { fileArtifactName } from '../contracts/index.js';

const RUN_ID = /^[A-Za-z0-9_-]{1,80}$/;

/**
 * Whether a run id may name a run's place in a store (a folder, a key's middle part): never `..`,
 * a `/` or anything else that would reach outside it. Record ids are narrower still.
 */
export function artifactRunIdValid(runId: string): boolean {
  return RUN_ID.test(runId);
}

/** Where an artifact sits: under its run, under the run's tenant. */
export interface ArtifactRef {
  tenant: string;
  /** The folder: a run's id, or an upload's own id ({@link uploadArtifactRef}). */
  runId: string;
  /** A screenshot's name or a file's (`storedArtifactNameSchema`). */
  name: string;
}

/**
 * Blobs a run leaves: screenshots today. Redis holds only their names. A local folder
 * by default (every role on one disk, as `npm start` has it); an S3-compatible bucket for a fleet
 * on several machines. Keys are `<tenant>/<run id>/<name>` in both.
 */
export interface ArtifactStore {
  put(ref: ArtifactRef, bytes: Uint8Array, contentType: string): Promise<void>;
  /** Undefined when there is no such artifact (never written, or expired with its run). */
  get(ref: ArtifactRef): Promise<{ bytes: Uint8Array; contentType: string } | undefined>;
  /** Removes every artifact of one run; nothing to remove is not an error. */
  deleteRun(tenant: string, runId: string): Promise<void>;
  /** The runs that have artifacts here, for the retention sweep. */
  listRuns(): AsyncIterable<{ tenant: string; runId: string }>;
}

/**
 * Where an upload's bytes sit: a folder of its own, named by its id, beside its tenant's runs; a
 * run that lists it does not own it (several may), so the run's retention does not delete it.
 */
export function uploadArtifactRef(tenant: string, fileId: string): ArtifactRef {
  return { tenant, runId: fileId, name: fileArtifactName(fileId) };
}

/** Whether a folder the store lists holds an upload (its `fil_…` id) rather than a run's artifacts. */
export function isUploadFolder(folder: string): boolean {
  return folder.startsWith('fil_');
}
