import type { Command } from 'commander';
import { jsonLine } from '../output.js';
import type { SessionOf } from '../session.js';

/** `leasehold sessions …`: what is done to a session after its runs. */
export function registerSessionCommands(program: Command, sessionOf: SessionOf): void {
  const sessions = program.command('sessions').description('delete sessions');

  sessions
    .command('delete <id>')
    .description('delete a session; refused while one of its runs has not ended')
    .action(async (id: string, _options: unknown, command: Command) => {
      const { api, output } = sessionOf(command);
      await api.deleteSession(id);
      output.line(output.json ? jsonLine({ id, deleted: true }) : `session ${id} deleted`);
    });
}
