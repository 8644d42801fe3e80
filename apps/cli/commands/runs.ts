import { writeFile } from 'node:fs/promises';
import { basename } from 'node:path';
import type { Command } from 'commander';
import type { RunQuery, SubmitRunBody } from '../api.js';
import { jsonArgument, listArgument, millisecondsArgument } from '../arguments.js';
import { type ExitCode, UsageError } from '../errors.js';
import { jsonLine, personControlLine, runDetailLines, runFileLine, runSummaryLine } from '../output.js';
import type { SessionOf } from '../session.js';
import { watchRun } from '../watch.js';

interface SubmitOptions {
  input: string;
  script?: string;
  session?: string;
  profile?: string;
  timeout?: string;
  idempotencyKey?: string;
  file?: string[];
  outputSchema?: string;
}

interface ListOptions {
  status?: string;
  session?: string;
  profile?: string;
  createdAfter?: string;
  createdBefore?: string;
  limit?: string;
  cursor?: string;
}

/** `leasehold runs …`: submit, list, get, watch, cancel, retry, take over, hand back. */
export function registerRunCommands(
  program: Command,
  sessionOf: SessionOf,
  setExit: (code: ExitCode) => void,
): void {
  const runs = program
    .command('runs')
    .description('submit, read, watch, cancel and retry runs; take their page over and hand it back');

  runs
    .command('submit')
    .description(
      "submit a run to a session, or to a new session on a profile with the tenant's default agent",
    )
    .requiredOption('--input <text>', 'what the run is asked to do')
    .option('--script <json|@file>', 'the scripted model’s steps and answer: JSON, or @ and a file of it')
    .option('--session <id>', 'the session to run in')
    .option('--profile <id>', 'a website profile: a new session bound to it is created first')
    .option('--timeout <ms>', "the run's deadline from submission, in milliseconds")
    .option('--idempotency-key <key>', 'the same key returns the same run')
    .option('--file <id…>', 'an uploaded file its upload acts may attach (files upload)', listArgument)
    .option('--output-schema <json|@file>', 'a JSON Schema the final answer must take (result.output)')
    .action(async (options: SubmitOptions, command: Command) => {
      if (Boolean(options.session) === Boolean(options.profile))
        throw new UsageError('give one of --session <id> or --profile <id>');
      const body: SubmitRunBody = { input: options.input };
      if (options.script !== undefined) body.script = jsonArgument('--script', options.script);
      if (options.timeout !== undefined) body.timeout_ms = millisecondsArgument('--timeout', options.timeout);
      if (options.file !== undefined) body.files = options.file;
      if (options.outputSchema !== undefined)
        body.output_schema = jsonArgument('--output-schema', options.outputSchema);
      const { api, output } = sessionOf(command);
      const sessionId =
        options.session ?? (await api.createSession({ browser_profile_id: options.profile as string })).id;
      const run = await api.submitRun(sessionId, body, options.idempotencyKey);
      output.line(output.json ? jsonLine(run) : `${run.id} ${run.status} (session ${sessionId})`);
    });

  runs
    .command('list')
    .description("the tenant's runs, newest first")
    .option(
      '--status <status>',
      'queued, running, parked, waiting_child, waiting_user, succeeded, failed, cancelled',
    )
    .option('--session <id>', 'runs of this session')
    .option('--profile <id>', 'runs on this profile')
    .option('--created-after <epoch-ms>', 'created after this time')
    .option('--created-before <epoch-ms>', 'created before this time')
    .option('--limit <n>', 'at most this many (1 to 100; default 20)')
    .option('--cursor <cursor>', 'the next page, as the last one named it')
    .action(async (options: ListOptions, command: Command) => {
      const { api, output } = sessionOf(command);
      const query: RunQuery = {
        ...(options.status ? { status: options.status } : {}),
        ...(options.session ? { session_id: options.session } : {}),
        ...(options.profile ? { profile_id: options.profile } : {}),
        ...(options.createdAfter ? { created_after: options.createdAfter } : {}),
        ...(options.createdBefore ? { created_before: options.createdBefore } : {}),
        ...(options.limit ? { limit: options.limit } : {}),
        ...(options.cursor ? { cursor: options.cursor } : {}),
      };
      const page = await api.listRuns(query);
      if (output.json) return output.line(jsonLine(page));
      for (const run of page.runs) output.line(runSummaryLine(run));
      if (page.next_cursor) output.line(`more: --cursor ${page.next_cursor}`);
    });

  runs
    .command('get <id>')
    .description('a run: status, usage against limits, pending approvals, its end')
    .action(async (id: string, _options: unknown, command: Command) => {
      const { api, output } = sessionOf(command);
      const run = await api.getRun(id);
      if (output.json) return output.line(jsonLine(run));
      for (const line of runDetailLines(run)) output.line(line);
    });

  runs
    .command('watch <id>')
    .description('print the run’s steps as they happen until it ends; the exit code says how it ended')
    .action(async (id: string, _options: unknown, command: Command) => {
      const { api, output } = sessionOf(command);
      setExit(await watchRun(api, id, output));
    });

  runs
    .command('files <id>')
    .description('what the run’s pages downloaded: stored with its SHA-256, or cancelled and why')
    .action(async (id: string, _options: unknown, command: Command) => {
      const { api, output } = sessionOf(command);
      const listed = await api.listRunFiles(id);
      if (output.json) return output.line(jsonLine(listed));
      for (const file of listed.files) output.line(runFileLine(file));
    });

  runs
    .command('file <id> <file>')
    .description('save a file the run downloaded, under its own name unless --out names another')
    .option('--out <path>', 'where to write it (- for standard output); an existing file is not replaced')
    .action(async (id: string, fileId: string, options: { out?: string }, command: Command) => {
      const { api, output } = sessionOf(command);
      const bytes = await api.runFileBytes(id, fileId);
      if (options.out === '-') {
        process.stdout.write(bytes);
        return;
      }
      // The name is the page's: only its last part is used, so it cannot point outside this folder.
      const path =
        options.out ??
        basename((await api.listRunFiles(id)).files.find((file) => file.id === fileId)?.name ?? fileId);
      try {
        await writeFile(path, bytes, { flag: 'wx' });
      } catch (error) {
        throw new UsageError(`cannot write ${path}: ${(error as Error).message}`);
      }
      output.line(
        output.json
          ? jsonLine({ id: fileId, path, size_bytes: bytes.byteLength })
          : `${path} ${bytes.byteLength} B`,
      );
    });

  runs
    .command('cancel <id>')
    .description('cancel a run (a running one stops at its next step)')
    .action(async (id: string, _options: unknown, command: Command) => {
      const { api, output } = sessionOf(command);
      const run = await api.cancelRun(id);
      output.line(output.json ? jsonLine(run) : `${run.id} ${run.status}`);
    });

  runs
    .command('takeover <id>')
    .description(
      'take the run’s page over (its principal only): a parked run’s at once, a running one at its next step; act on it in the run page’s live view',
    )
    .action(async (id: string, _options: unknown, command: Command) => {
      const { api, output } = sessionOf(command);
      const control = await api.takeOverRun(id);
      output.line(output.json ? jsonLine(control) : personControlLine(control));
    });

  runs
    .command('handback <id>')
    .description('hand the run’s page back: the run goes on from the page as you left it')
    .action(async (id: string, _options: unknown, command: Command) => {
      const { api, output } = sessionOf(command);
      const control = await api.handBackRun(id);
      output.line(output.json ? jsonLine(control) : personControlLine(control));
    });

  runs
    .command('retry <id>')
    .description('retry a failed run as a new attempt')
    .action(async (id: string, _options: unknown, command: Command) => {
      const { api, output } = sessionOf(command);
      const run = await api.retryRun(id);
      output.line(output.json ? jsonLine(run) : `${run.id} ${run.status} (attempt ${run.attempt})`);
    });
}
