import type { Command } from 'commander';
import { listArgument } from '../arguments.js';
import { UsageError } from '../errors.js';
import { jsonLine, keyLine } from '../output.js';
import type { SessionOf } from '../session.js';

/** `leasehold keys …`: the tenant's API keys (admin scope). A key is shown once, when made. */
export function registerKeyCommands(program: Command, sessionOf: SessionOf): void {
  const keys = program.command('keys').description("issue, list and revoke the tenant's API keys (admin)");

  keys
    .command('create')
    .description('issue a key; it is printed once, never stored')
    .option(
      '--scope <scope...>',
      'runs:write, runs:read, approvals:write, approvals:any, admin (repeat, or comma-separate)',
      listArgument,
    )
    .requiredOption('--principal <principal>', 'who the key speaks for (names it in lists and decisions)')
    .action(async (options: { scope?: string[]; principal: string }, command: Command) => {
      if (!options.scope?.length) throw new UsageError('give at least one --scope <scope>');
      const { api, output } = sessionOf(command);
      const created = await api.createKey({ principal: options.principal, scopes: options.scope });
      if (output.json) return output.line(jsonLine(created));
      output.line(`key_id: ${created.key_id}`);
      output.line(`key: ${created.key}`);
    });

  keys
    .command('list')
    .description("the tenant's keys: ids, principals, scopes (never a key)")
    .action(async (_options: unknown, command: Command) => {
      const { api, output } = sessionOf(command);
      const answer = await api.listKeys();
      if (output.json) return output.line(jsonLine(answer));
      for (const key of answer.api_keys) output.line(keyLine(key));
    });

  keys
    .command('revoke <id>')
    .description('revoke a key: it is refused from then on')
    .action(async (id: string, _options: unknown, command: Command) => {
      const { api, output } = sessionOf(command);
      await api.revokeKey(id);
      // The API answers 204 with no body; --json still prints one document.
      output.line(output.json ? jsonLine({ key_id: id, revoked: true }) : `${id} revoked`);
    });
}
