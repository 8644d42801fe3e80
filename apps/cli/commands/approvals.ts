import type { Command } from 'commander';
import { grantArgument } from '../arguments.js';
import { approvalLine, jsonLine } from '../output.js';
import type { SessionOf } from '../session.js';

/** The reason a denial carries when none is given: the API wants one, and the model reads it. */
const DEFAULT_DENIAL_REASON = 'denied from the leasehold command line';

/** `leasehold approvals …`: list the pending ones, approve (with a task grant) or deny. */
export function registerApprovalCommands(program: Command, sessionOf: SessionOf): void {
  const approvals = program.command('approvals').description('list and decide pending approvals');

  approvals
    .command('list')
    .description('pending approvals, of one run or of the tenant')
    .option('--run <id>', 'only this run’s')
    .action(async (options: { run?: string }, command: Command) => {
      const { api, output } = sessionOf(command);
      const answer = await api.listApprovals(options.run);
      if (output.json) return output.line(jsonLine(answer));
      for (const approval of answer.approvals) output.line(approvalLine(approval));
    });

  approvals
    .command('approve <id>')
    .description('approve; a grant also covers later actions of the run (at most 30 min, 200 actions)')
    .option('--grant <json>', 'a task grant: {"duration_ms": 600000, "max_actions": 20}')
    .action(async (id: string, options: { grant?: string }, command: Command) => {
      const grant = options.grant === undefined ? undefined : grantArgument(options.grant);
      const { api, output } = sessionOf(command);
      const approval = await api.approve(id, grant);
      output.line(output.json ? jsonLine(approval) : approvalLine(approval));
    });

  approvals
    .command('deny <id>')
    .description('deny; the reason is handed to the run')
    .option('--reason <text>', 'why', DEFAULT_DENIAL_REASON)
    .action(async (id: string, options: { reason: string }, command: Command) => {
      const { api, output } = sessionOf(command);
      const approval = await api.deny(id, options.reason);
      output.line(output.json ? jsonLine(approval) : approvalLine(approval));
    });
}
