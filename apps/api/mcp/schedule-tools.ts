import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import {
  RUN_INPUT_MAX_CHARS,
  recordIdSchema,
  scheduleLimitsSchema,
  scheduleOverlapSchema,
} from '../../../libs/contracts/index.js';
import { scriptSchema } from '../../../libs/models/index.js';
import { type callRest, toolResult } from './rest-call.js';

type Rest = (request: Parameters<typeof callRest>[2]) => ReturnType<typeof callRest>;

const scheduleId = recordIdSchema.describe('The schedule id, e.g. sch_… (from create_schedule).');

const createScheduleInput = z.object({
  session_id: recordIdSchema.describe('The session (ses_…) each run goes to.'),
  input: z.string().min(1).max(RUN_INPUT_MAX_CHARS).describe('What each run is asked to do, in plain words.'),
  cron: z
    .string()
    .min(1)
    .max(128)
    .optional()
    .describe('A cron pattern such as "0 7 * * 1-5", read in timezone. Give this or every_ms.'),
  every_ms: z
    .number()
    .int()
    .positive()
    .optional()
    .describe('Fire every so many milliseconds instead of a cron.'),
  timezone: z.string().min(1).max(64).optional().describe('The IANA time zone of the cron (default UTC).'),
  overlap: scheduleOverlapSchema
    .optional()
    .describe('While the previous run goes on: skip the fire (default), or queue one to run after it.'),
  daily_cost_cap_usd: z
    .string()
    .optional()
    .describe('The most a day’s (UTC) runs may cost, e.g. "5"; fires past it are skipped.'),
  limits: scheduleLimitsSchema
    .optional()
    .describe('Each run’s own limits (at most the browser-task limits).'),
  script: scriptSchema
    .optional()
    .describe('For agents on the scripted model only: the steps and the answer.'),
});

/**
 * The runs mode's schedule tools: each one REST call as the caller, so scopes (runs:write to
 * change, runs:read to read) and tenancy hold as they do for REST.
 */
export function registerScheduleTools(server: McpServer, rest: Rest): void {
  server.registerTool(
    'create_schedule',
    {
      title: 'Schedule a run',
      description:
        'Makes a schedule that submits a run to the session at each due time of a cron (in a time zone) or every so many milliseconds. Each run carries the schedule id and its due time. Answers the schedule with its next due times.',
      inputSchema: createScheduleInput,
    },
    async (args) => {
      const { session_id, input, script, limits, ...timing } = args;
      return toolResult(
        await rest({
          method: 'POST',
          url: '/v1/schedules',
          body: {
            ...timing,
            run: { session_id, input, ...(script ? { script } : {}), ...(limits ? { limits } : {}) },
          },
        }),
      );
    },
  );

  server.registerTool(
    'list_schedules',
    {
      title: 'List schedules',
      description:
        "Lists the tenant's schedules: each with its timing, whether it is paused, its next due times and what its fires came to (fired, skipped_overlap, queued, missed, capped).",
      inputSchema: z.object({}),
      annotations: { readOnlyHint: true },
    },
    async () => toolResult(await rest({ method: 'GET', url: '/v1/schedules' })),
  );

  server.registerTool(
    'list_schedule_runs',
    {
      title: "List a schedule's runs",
      description: 'Lists the runs a schedule submitted, newest due time first; read one with get_run.',
      inputSchema: z.object({ schedule_id: scheduleId }),
      annotations: { readOnlyHint: true },
    },
    async (args) => toolResult(await rest({ method: 'GET', url: `/v1/schedules/${args.schedule_id}/runs` })),
  );

  server.registerTool(
    'set_schedule',
    {
      title: 'Pause or resume a schedule',
      description:
        'pause: no due time fires until resumed (none is counted missed meanwhile); resume: due times from now on fire again. Answers the schedule with its next due times.',
      inputSchema: z.object({ schedule_id: scheduleId, action: z.enum(['pause', 'resume']) }),
      annotations: { destructiveHint: false },
    },
    async (args) =>
      toolResult(await rest({ method: 'POST', url: `/v1/schedules/${args.schedule_id}/${args.action}` })),
  );
}
