import type { Command } from 'commander';
import type { LeaseholdApi } from './api.js';
import type { Output } from './output.js';

/** What each command's action works with: the API client and where to write. */
export interface CommandSession {
  api: LeaseholdApi;
  output: Output;
}

/** Made per action from the global flags and the environment; a missing key is a usage error. */
export type SessionOf = (command: Command) => CommandSession;
