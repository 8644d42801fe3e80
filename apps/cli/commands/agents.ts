import type { Command } from 'commander';
import { jsonArgument, textArgument } from '../arguments.js';
import { UsageError } from '../errors.js';
import { jsonLine } from '../output.js';
import type { SessionOf } from '../session.js';

interface UpdateOptions {
  instructions?: string;
  metadata?: string;
}

/** `leasehold agents …`: an agent's change makes a new version; sessions keep the one they pinned. */
export function registerAgentCommands(program: Command, sessionOf: SessionOf): void {
  const agents = program.command('agents').description('change agents');

  agents
    .command('update <id>')
    .description('change an agent into a new version; existing sessions keep theirs (admin scope)')
    .option('--instructions <text>', 'its instructions, or @file')
    .option('--metadata <json>', 'metadata keys to set (null removes one), as JSON or @file')
    .action(async (id: string, options: UpdateOptions, command: Command) => {
      const metadata =
        options.metadata === undefined ? undefined : jsonArgument('--metadata', options.metadata);
      if (
        metadata !== undefined &&
        (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata))
      )
        throw new UsageError('--metadata: expected a JSON object');
      const instructions =
        options.instructions === undefined ? undefined : textArgument('--instructions', options.instructions);
      const body = {
        ...(instructions !== undefined ? { instructions } : {}),
        ...(metadata !== undefined ? { metadata: metadata as Record<string, never> } : {}),
      };
      if (Object.keys(body).length === 0)
        throw new UsageError('give what to change: --instructions or --metadata');
      const { api, output } = sessionOf(command);
      const agent = await api.changeAgent(id, body);
      output.line(output.json ? jsonLine(agent) : `agent ${agent.id} version ${agent.version}`);
    });
}
