import type { Command } from 'commander';
import type { PatchSchedule } from '../api.js';
import { jsonArgument, millisecondsArgument } from '../arguments.js';
import { UsageError } from '../errors.js';
import { jsonLine, runSummaryLine, scheduleLine } from '../output.js';
import type { SessionOf } from '../session.js';

interface TimingOptions {
  cron?: string;
  every?: string;
  timezone?: string;
  overlap?: string;
  dailyCostCap?: string;
}

interface CreateOptions extends TimingOptions {
  input: string;
  script?: string;
  session?: string;
  profile?: string;
  timeout?: string;
}

/** The flags every schedule command that sets a timing takes. */
function timingFlags(command: Command): Command {
  return command
    .option('--cron <pattern>', 'a cron pattern (five fields, or six with seconds first)')
    .option('--every <ms>', 'fire every so many milliseconds instead (the first fire is at once)')
    .option('--timezone <zone>', "the cron's IANA time zone (default UTC)")
    .option('--overlap <skip|queue>', 'while the previous run goes on: skip the fire, or hold one')
    .option('--daily-cost-cap <usd>', "the most a day's (UTC) runs may cost; fires past it are skipped");
}

/** The timing fields the flags give; the API checks them and answers in its own words. */
function timingOf(options: TimingOptions): Omit<PatchSchedule, 'run'> {
  if (options.cron !== undefined && options.every !== undefined)
    throw new UsageError('give one of --cron <pattern> or --every <ms>');
  return {
    ...(options.cron !== undefined ? { cron: options.cron } : {}),
    ...(options.every !== undefined ? { every_ms: millisecondsArgument('--every', options.every) } : {}),
    ...(options.timezone !== undefined ? { timezone: options.timezone } : {}),
    ...(options.overlap !== undefined ? { overlap: options.overlap as 'skip' | 'queue' } : {}),
    ...(options.dailyCostCap !== undefined ? { daily_cost_cap_usd: options.dailyCostCap } : {}),
  };
}

/** `leasehold schedules …`: runs submitted on a cron or an interval. */
export function registerScheduleCommands(program: Command, sessionOf: SessionOf): void {
  const schedules = program
    .command('schedules')
    .description('schedule runs on a cron or an interval; list, change, pause, resume and delete them');

  timingFlags(
    schedules
      .command('create')
      .description(
        'a schedule submitting a run to a session (or a new session on a profile) at each due time',
      )
      .requiredOption('--input <text>', 'what each run is asked to do')
      .option('--script <json|@file>', 'the scripted model’s steps and answer: JSON, or @ and a file of it')
      .option('--session <id>', 'the session its runs go to')
      .option('--profile <id>', 'a website profile: a new session bound to it is created first')
      .option('--timeout <ms>', "each run's deadline from its submission, in milliseconds"),
  ).action(async (options: CreateOptions, command: Command) => {
    if (Boolean(options.session) === Boolean(options.profile))
      throw new UsageError('give one of --session <id> or --profile <id>');
    if ((options.cron === undefined) === (options.every === undefined))
      throw new UsageError('give one of --cron <pattern> or --every <ms>');
    const { api, output } = sessionOf(command);
    const sessionId =
      options.session ?? (await api.createSession({ browser_profile_id: options.profile as string })).id;
    const schedule = await api.createSchedule({
      ...timingOf(options),
      run: {
        session_id: sessionId,
        input: options.input,
        ...(options.script !== undefined ? { script: jsonArgument('--script', options.script) } : {}),
        ...(options.timeout !== undefined
          ? { timeout_ms: millisecondsArgument('--timeout', options.timeout) }
          : {}),
      },
    } as Parameters<typeof api.createSchedule>[0]);
    output.line(output.json ? jsonLine(schedule) : scheduleLine(schedule));
  });

  schedules
    .command('list')
    .description("the tenant's schedules")
    .action(async (_options: unknown, command: Command) => {
      const { api, output } = sessionOf(command);
      const answer = await api.listSchedules();
      if (output.json) return output.line(jsonLine(answer));
      for (const schedule of answer.schedules) output.line(scheduleLine(schedule));
    });

  schedules
    .command('get <id>')
    .description('a schedule with its next due times')
    .action(async (id: string, _options: unknown, command: Command) => {
      const { api, output } = sessionOf(command);
      const schedule = await api.getSchedule(id);
      if (output.json) return output.line(jsonLine(schedule));
      output.line(scheduleLine(schedule));
      for (const dueMs of schedule.next_due_at_ms) output.line(`  due ${new Date(dueMs).toISOString()}`);
    });

  timingFlags(
    schedules
      .command('update <id>')
      .description('change a schedule: its timing, overlap, cap or its runs’ input')
      .option('--input <text>', 'what each run is asked to do'),
  ).action(async (id: string, options: TimingOptions & { input?: string }, command: Command) => {
    const body: PatchSchedule = {
      ...timingOf(options),
      ...(options.input !== undefined ? { run: { input: options.input } } : {}),
    };
    const { api, output } = sessionOf(command);
    const schedule = await api.updateSchedule(id, body);
    output.line(output.json ? jsonLine(schedule) : scheduleLine(schedule));
  });

  for (const to of ['pause', 'resume'] as const) {
    schedules
      .command(`${to} <id>`)
      .description(to === 'pause' ? 'no due time fires until resumed' : 'due times from now on fire again')
      .action(async (id: string, _options: unknown, command: Command) => {
        const { api, output } = sessionOf(command);
        const schedule = await api.switchSchedule(id, to);
        output.line(output.json ? jsonLine(schedule) : scheduleLine(schedule));
      });
  }

  schedules
    .command('delete <id>')
    .description('delete a schedule; the runs it submitted stay')
    .action(async (id: string, _options: unknown, command: Command) => {
      const { api, output } = sessionOf(command);
      await api.deleteSchedule(id);
      output.line(output.json ? jsonLine({ id, deleted: true }) : `${id} deleted`);
    });

  schedules
    .command('runs <id>')
    .description('the runs a schedule submitted, newest due time first')
    .action(async (id: string, _options: unknown, command: Command) => {
      const { api, output } = sessionOf(command);
      const answer = await api.scheduleRuns(id);
      if (output.json) return output.line(jsonLine(answer));
      for (const run of answer.runs) output.line(runSummaryLine(run));
    });
}
