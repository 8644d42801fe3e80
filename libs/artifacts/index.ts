export type { ArtifactRef, ArtifactStore } from './artifact-store.js';
export { LocalArtifactStore } from './local-store.js';
