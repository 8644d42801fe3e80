import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import type { Command } from 'commander';
import { UsageError } from '../errors.js';
import { jsonLine, uploadedFileLine } from '../output.js';
import type { SessionOf } from '../session.js';

interface UploadOptions {
  name?: string;
  type?: string;
}

/** `leasehold files …`: files a run's `upload` acts may set a file input to. */
export function registerFileCommands(program: Command, sessionOf: SessionOf): void {
  const files = program.command('files').description('upload files for runs to attach, and read them back');

  files
    .command('upload <path>')
    .description(
      "upload a file; its id goes in a run's --file, and it expires 7 days on unless a run lists it",
    )
    .option('--name <name>', 'the name the page sees (default: the file’s own)')
    .option('--type <content-type>', 'its content type (default: from its name, else bytes)')
    .action(async (path: string, options: UploadOptions, command: Command) => {
      const { api, output } = sessionOf(command);
      let bytes: Buffer;
      try {
        bytes = await readFile(path);
      } catch (error) {
        throw new UsageError(`cannot read ${path}: ${(error as Error).message}`);
      }
      const name = options.name ?? basename(path);
      // Loaded here alone: the type table is large, and no other command needs it.
      const { lookup } = await import('mime-types');
      const contentType = options.type ?? (lookup(name) || 'application/octet-stream');
      const file = await api.uploadFile({ name, contentType, bytes: new Uint8Array(bytes) });
      output.line(output.json ? jsonLine(file) : uploadedFileLine(file));
    });

  files
    .command('get <id>')
    .description('an uploaded file’s record: name, type, size, SHA-256, when it expires')
    .action(async (id: string, _options: unknown, command: Command) => {
      const { api, output } = sessionOf(command);
      const file = await api.getFile(id);
      output.line(output.json ? jsonLine(file) : uploadedFileLine(file));
    });
}
