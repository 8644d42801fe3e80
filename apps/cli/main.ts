import { runCli } from './program.js';
import { packageVersion } from './version.js';

/**
 * `leasehold`, the command line: `npx leasehold --help`. The environment is read here
 * alone; the exit code is set, never forced, so stdout is flushed before the process ends.
 */
process.exitCode = await runCli(process.argv.slice(2), {
  env: { apiUrl: process.env.LEASEHOLD_API_URL, apiKey: process.env.LEASEHOLD_API_KEY },
  stdout: process.stdout,
  stderr: process.stderr,
  version: packageVersion(),
});
