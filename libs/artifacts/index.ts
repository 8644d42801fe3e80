import type { Config } from '../config/index.js';
import type { ArtifactStore } from './artifact-store.js';
import { LocalArtifactStore } from './local-store.js';
import { S3ArtifactStore } from './s3-store.js';

export type { ArtifactRef, ArtifactStore } from './artifact-store.js';
export { artifactRunIdValid, isUploadFolder, uploadArtifactRef } from './artifact-store.js';
export { LocalArtifactStore } from './local-store.js';
export { S3ArtifactStore, type S3ArtifactStoreOptions } from './s3-store.js';

/**
 * The artifact store a role writes and reads through, built once at start-up from config: the
 * S3-compatible bucket when one is named (every machine of a fleet reaches it), else the local
 * folder (made here). Either fails start-up when it cannot be used, never the first screenshot.
 */
export function openArtifactStore(config: Pick<Config, 'artifacts'>): Promise<ArtifactStore> {
  const { s3, dir } = config.artifacts;
  if (s3 !== undefined) return new S3ArtifactStore(s3).open();
  return new LocalArtifactStore(dir).open();
}
