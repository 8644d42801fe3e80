import { runCli } from './program.js';
import { packageVersion } from './version.js';

/**
 * `leasehold`, the command line: `npx leasehold --help`. The environment is read here
 * alone; the exit code is set, never forced, so stdout is flushed before the process ends (but
 * for a closed stdout, where nothing is left to flush).
 */
// A reader that went away (`leasehold runs list | head`) leaves nothing to write to: the command is
// done, as a shell's own tools end, not an unhandled EPIPE stack on stderr.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  process.exit(0);
});

process.exitCode = await runCli(process.argv.slice(2), {
  env: { apiUrl: process.env.LEASEHOLD_API_URL, apiKey: process.env.LEASEHOLD_API_KEY },
  stdout: process.stdout,
  stderr: process.stderr,
  version: packageVersion(),
});
