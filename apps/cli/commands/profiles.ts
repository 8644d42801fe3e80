import type { Command } from 'commander';
import type { CreateProfileBody } from '../api.js';
import { listArgument } from '../arguments.js';
import { UsageError } from '../errors.js';
import { jsonLine, profileLine } from '../output.js';
import type { SessionOf } from '../session.js';

interface UpdateOptions {
  origin?: string[];
  frameOrigin?: string[];
  subresources?: string;
  protected?: boolean;
}

interface CreateOptions {
  origin: string[];
  frameOrigin?: string[];
  subresources?: string;
  protected?: boolean;
}

/** `leasehold profiles …`: website profiles, the origins their pages may visit. */
export function registerProfileCommands(program: Command, sessionOf: SessionOf): void {
  const profiles = program
    .command('profiles')
    .description('create, list, change and delete website profiles');

  profiles
    .command('create <id>')
    .description('a website profile (admin scope)')
    .option('--origin <origin...>', 'an origin its pages may visit (repeat, or comma-separate)', listArgument)
    .option('--frame-origin <origin...>', 'an origin child frames may load besides those', listArgument)
    .option('--subresources <policy>', 'any (default) or allowed_origins')
    .option('--protected', 'leased to its owner (this key’s principal) alone')
    .action(async (id: string, options: CreateOptions, command: Command) => {
      if (!options.origin?.length) throw new UsageError('give at least one --origin <origin>');
      const body: CreateProfileBody = {
        id,
        allowed_origins: options.origin,
        ...(options.frameOrigin ? { frame_origins: options.frameOrigin } : {}),
        ...(options.subresources ? { subresources: options.subresources } : {}),
        ...(options.protected ? { protected: true } : {}),
      };
      const { api, output } = sessionOf(command);
      const profile = await api.createProfile(body);
      output.line(output.json ? jsonLine(profile) : profileLine(profile));
    });

  profiles
    .command('update <id>')
    .description("change a profile's settings; runs that lease it after use them (admin or its principal)")
    .option('--origin <origin...>', 'the origins its pages may visit, replacing its own', listArgument)
    .option('--frame-origin <origin...>', 'the frame origins, replacing its own', listArgument)
    .option('--subresources <policy>', 'any or allowed_origins')
    .option('--protected', 'leased to its owner alone')
    .option('--no-protected', 'leased to any principal of the tenant')
    .action(async (id: string, options: UpdateOptions, command: Command) => {
      const body = {
        ...(options.origin ? { allowed_origins: options.origin } : {}),
        ...(options.frameOrigin ? { frame_origins: options.frameOrigin } : {}),
        ...(options.subresources ? { subresources: options.subresources as 'any' | 'allowed_origins' } : {}),
        ...(options.protected !== undefined ? { protected: options.protected } : {}),
      };
      if (Object.keys(body).length === 0)
        throw new UsageError(
          'give what to change: --origin, --frame-origin, --subresources or --[no-]protected',
        );
      const { api, output } = sessionOf(command);
      const profile = await api.changeProfile(id, body);
      output.line(output.json ? jsonLine(profile) : profileLine(profile));
    });

  profiles
    .command('delete <id>')
    .description(
      'delete a profile and its sealed state; refused while a run uses it (admin or its principal)',
    )
    .action(async (id: string, _options: unknown, command: Command) => {
      const { api, output } = sessionOf(command);
      await api.deleteProfile(id);
      output.line(output.json ? jsonLine({ id, deleted: true }) : `profile ${id} deleted`);
    });

  profiles
    .command('list')
    .description("the tenant's profiles")
    .action(async (_options: unknown, command: Command) => {
      const { api, output } = sessionOf(command);
      const answer = await api.listProfiles();
      if (output.json) return output.line(jsonLine(answer));
      for (const profile of answer.profiles) output.line(profileLine(profile));
    });
}
