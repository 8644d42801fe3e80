import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { storedArtifactNameSchema, tenantIdSchema } from '../contracts/index.js';
import { type ArtifactRef, type ArtifactStore, artifactRunIdValid } from './artifact-store.js';

const CONTENT_TYPES: Record<string, string> = { jpg: 'image/jpeg', png: 'image/png' };

/**
 * The artifact store in a local folder (`LEASEHOLD_ARTIFACTS_DIR`): `<dir>/<tenant>/<run id>/<name>`.
 * Enough when every role shares one disk. Each part of a path is checked against its schema, so
 * no name reaches outside the folder. A write lands whole or not at all (written aside, renamed).
 */
export class LocalArtifactStore implements ArtifactStore {
  constructor(private readonly dir: string) {}

  /** Makes the folder (start-up: a folder that cannot be made stops the process). */
  async open(): Promise<this> {
    await mkdir(this.dir, { recursive: true });
    return this;
  }

  async put(ref: ArtifactRef, bytes: Uint8Array, _contentType: string): Promise<void> {
    const runDir = this.#runDir(ref.tenant, ref.runId);
    await mkdir(runDir, { recursive: true });
    const path = join(runDir, storedArtifactNameSchema.parse(ref.name));
    const aside = `${path}.${process.pid}.${Date.now()}.part`;
    await writeFile(aside, bytes);
    await rename(aside, path);
  }

  async get(ref: ArtifactRef): Promise<{ bytes: Uint8Array; contentType: string } | undefined> {
    const name = storedArtifactNameSchema.safeParse(ref.name);
    if (!name.success || !this.#valid(ref.tenant, ref.runId)) return undefined;
    try {
      const bytes = await readFile(join(this.#runDir(ref.tenant, ref.runId), name.data));
      return {
        bytes,
        contentType: CONTENT_TYPES[name.data.split('.').pop() ?? ''] ?? 'application/octet-stream',
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  async deleteRun(tenant: string, runId: string): Promise<void> {
    if (!this.#valid(tenant, runId)) return;
    await rm(this.#runDir(tenant, runId), { recursive: true, force: true });
  }

  async *listRuns(): AsyncIterable<{ tenant: string; runId: string }> {
    for (const tenant of await entries(this.dir)) {
      if (!tenantIdSchema.safeParse(tenant).success) continue;
      for (const runId of await entries(join(this.dir, tenant))) {
        if (artifactRunIdValid(runId)) yield { tenant, runId };
      }
    }
  }

  #valid(tenant: string, runId: string): boolean {
    return tenantIdSchema.safeParse(tenant).success && artifactRunIdValid(runId);
  }

  #runDir(tenant: string, runId: string): string {
    if (!this.#valid(tenant, runId)) throw new RangeError(`no artifact folder for ${tenant}/${runId}`);
    return join(this.dir, tenant, runId);
  }
}

async function entries(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}
