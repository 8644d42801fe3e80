import { existsSync, readFileSync } from 'node:fs';

/**
 * The version of the package the CLI is part of: the nearest package.json named `leasehold` above
 * this module, whether it runs from apps/cli (sources) or dist/apps/cli (the build).
 */
export function packageVersion(from: URL = new URL('.', import.meta.url)): string {
  for (let folder = from; ; folder = new URL('..', folder)) {
    const manifest = new URL('package.json', folder);
    if (existsSync(manifest)) {
      const { name, version } = JSON.parse(readFileSync(manifest, 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (name === 'leasehold' && version) return version;
    }
    if (folder.pathname === '/') return 'unknown';
  }
}
