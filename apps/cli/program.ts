import { Command, CommanderError } from 'commander';
import { LeaseholdApi } from './api.js';
import { registerAgentCommands } from './commands/agents.js';
import { registerApprovalCommands } from './commands/approvals.js';
import { registerFileCommands } from './commands/files.js';
import { registerKeyCommands } from './commands/keys.js';
import { registerProfileCommands } from './commands/profiles.js';
import { registerRunCommands } from './commands/runs.js';
import { registerScheduleCommands } from './commands/schedules.js';
import { registerSessionCommands } from './commands/sessions.js';
import { CliError, EXIT_CODES, type ExitCode, UsageError } from './errors.js';
import { streamOutput } from './output.js';
import type { SessionOf } from './session.js';

/** The API the fleet's banner prints when none is named. */
export const DEFAULT_API_URL = 'http://127.0.0.1:3000';

/** What the process gives the CLI: main.ts reads the environment, nothing below it does. */
export interface CliContext {
  /** `LEASEHOLD_API_URL` / `LEASEHOLD_API_KEY`, read once by main.ts. */
  env: { apiUrl?: string | undefined; apiKey?: string | undefined };
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  /** What `--version` prints (main.ts reads it from package.json). */
  version?: string;
}

interface GlobalOptions {
  apiUrl?: string;
  apiKey?: string;
  json?: boolean;
}

const EXIT_HELP = `
Environment: LEASEHOLD_API_URL (default ${DEFAULT_API_URL}), LEASEHOLD_API_KEY; the flags win.
Errors print as "error <code>: <message>". Exit codes: 0 done (runs watch: the run succeeded);
1 the API answered an error (runs watch: the run failed); 2 bad flags or arguments;
3 runs watch: the run was cancelled; 4 the API could not be reached.`;

function buildProgram(context: CliContext, exit: { code: ExitCode }): Command {
  const program = new Command('leasehold')
    .description('Submit, watch and decide Leasehold runs over its REST API')
    .option('--api-url <url>', 'the API (env LEASEHOLD_API_URL)')
    .option('--api-key <key>', 'an API key, lhk_… (env LEASEHOLD_API_KEY)')
    .option('--json', "print the API's JSON (runs watch: one event a line)")
    .version(context.version ?? 'unknown', '-V, --version', 'print the version')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => void context.stdout.write(text),
      writeErr: (text) => void context.stderr.write(text),
    })
    .showHelpAfterError('(add --help for usage)')
    .addHelpText('after', EXIT_HELP);

  const sessionOf: SessionOf = (command) => {
    const options = command.optsWithGlobals<GlobalOptions>();
    const apiKey = options.apiKey || context.env.apiKey;
    if (!apiKey) throw new UsageError('no API key: set LEASEHOLD_API_KEY or pass --api-key');
    const apiUrl = options.apiUrl || context.env.apiUrl || DEFAULT_API_URL;
    return {
      api: new LeaseholdApi({ apiUrl, apiKey }),
      output: streamOutput(options.json === true, context.stdout, context.stderr),
    };
  };
  const setExit = (code: ExitCode) => {
    exit.code = code;
  };

  registerRunCommands(program, sessionOf, setExit);
  registerApprovalCommands(program, sessionOf);
  registerFileCommands(program, sessionOf);
  registerProfileCommands(program, sessionOf);
  registerKeyCommands(program, sessionOf);
  registerScheduleCommands(program, sessionOf);
  registerSessionCommands(program, sessionOf);
  registerAgentCommands(program, sessionOf);
  return program;
}

/**
 * Runs `leasehold` on `argv` (without node and the script) and answers its exit code. Commander's
 * own usage errors and ours exit 2; the API's errors print as `error <code>: <message>`.
 */
export async function runCli(argv: string[], context: CliContext): Promise<ExitCode> {
  const exit: { code: ExitCode } = { code: EXIT_CODES.ok };
  const program = buildProgram(context, exit);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return exit.code;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT_CODES.ok : EXIT_CODES.usage;
    if (error instanceof UsageError) {
      context.stderr.write(`error: ${error.message}\n`);
      return error.exitCode;
    }
    if (error instanceof CliError) {
      context.stderr.write(`error ${error.code}: ${error.message}\n`);
      return error.exitCode;
    }
    throw error;
  }
}
