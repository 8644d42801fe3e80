import { readdirSync, readFileSync } from 'node:fs';
import type { RedisClient } from './redis-client.js';

const LUA_DIR = new URL('./lua/', import.meta.url);

/**
 * A script file named `<command>-<number of keys>.lua`, as BullMQ names its own. A `+` after the
 * number (`finishRun-2+.lua`) marks a script that takes more keys after those: the run's other
 * keys, whose number depends on its attempts (retention); its caller passes the number of
 * keys first, as EVAL itself takes it.
 */
const SCRIPT_FILE = /^([A-Za-z]+)-(\d+)(\+?)\.lua$/;

type Reply = Promise<Array<string | number>>;
type Arg = string | number;

/** Every Lua script under `lua/`, as a command: KEYS first, then ARGV (see each file's header). */
export interface ScriptCommands {
  acquireOrRenewLock(lockKey: string, token: string, ttlMs: number): Promise<number>;
  releaseLock(lockKey: string, token: string): Promise<number>;
  createProfile(profileKey: string, ...argv: Arg[]): Promise<number>;
  updateProfile(profileKey: string, ...argv: Arg[]): Promise<number>;
  deleteProfile(
    profileKey: string,
    liveKey: string,
    turnsKey: string,
    leasePrefix: string,
    ...argv: Arg[]
  ): Promise<[string, string?]>;
  addApiKey(tenantKeysKey: string, keyId: string, keyHash: string, maxPerTenant: number): Promise<number>;
  decideScheduleFire(scheduleKey: string, firesKey: string, ...argv: Arg[]): Promise<number>;
  acquireLease(
    liveKey: string,
    leaseKey: string,
    leasePrefix: string,
    profileKey: string,
    idempotencyKey: string,
    ...argv: Arg[]
  ): Promise<Array<string | null | Array<string | null>>>;
  renewIdempotently(idempotencyKey: string, leaseKey: string, ...argv: Arg[]): Reply;
  beginClose(leaseKey: string, ...argv: Arg[]): Reply;
  finishClose(leaseKey: string, liveKey: string, profileKey: string, ...argv: Arg[]): Reply;
  noteSealFault(profileKey: string, fault: string): Promise<number>;
  advanceSequence(leaseKey: string, ...argv: Arg[]): Reply;
  noteEffect(leaseKey: string, ...argv: Arg[]): Promise<number>;
  claimIdempotency(key: string, ...argv: Arg[]): Reply;
  putAgent(agentKey: string, versionsKey: string, ...argv: Arg[]): Promise<string[]>;
  submitRun(
    runKey: string,
    eventsKey: string,
    secretsKey: string,
    ...argv: Arg[]
  ): Promise<[string, string, Array<string | number>]>;
  claimRun(
    runKey: string,
    eventsKey: string,
    transcriptKey: string,
    ...argv: Arg[]
  ): Promise<[string, string, Array<string | number>, (string | number)?, number?, string[]?]>;
  /** KEYS: the script's own, then the run's other keys (`+` file: the count goes first). */
  suspendRun(numberOfKeys: number, ...keysAndArgs: Arg[]): Promise<[string, string, Array<string | number>]>;
  requeueRun(
    runKey: string,
    eventsKey: string,
    ...argv: Arg[]
  ): Promise<[string, string, Array<string | number>]>;
  releaseRun(
    runKey: string,
    eventsKey: string,
    ...argv: Arg[]
  ): Promise<[string, string, Array<string | number>]>;
  /** KEYS: the script's own, then the run's other keys (`+` file: the count goes first). */
  finishRun(numberOfKeys: number, ...keysAndArgs: Arg[]): Promise<[string, string, Array<string | number>]>;
  /** KEYS: the script's own, then the run's other keys (`+` file: the count goes first). */
  cancelRun(numberOfKeys: number, ...keysAndArgs: Arg[]): Promise<[string, string, Array<string | number>]>;
  /** KEYS: the script's own, then the run's other keys (`+` file: the count goes first). */
  failRun(numberOfKeys: number, ...keysAndArgs: Arg[]): Promise<[string, string, Array<string | number>]>;
  /** KEYS: the script's own, then the run's other keys (`+` file: the count goes first). */
  retryRun(numberOfKeys: number, ...keysAndArgs: Arg[]): Promise<[string, string, Array<string | number>]>;
  addUsage(runKey: string, ...argv: Arg[]): Promise<[string, string, Array<string | number>]>;
  markUnverified(runKey: string, ...argv: Arg[]): Promise<[string, string, Array<string | number>]>;
  noteBrowserTools(runKey: string, ...argv: Arg[]): Promise<[string, string, Array<string | number>]>;
  /** `argv`: the owner token, then the state as `packJson` stored it (a Buffer when deflated). */
  saveLoopState(runKey: string, loopKey: string, ...argv: Array<Arg | Buffer>): Promise<[string, string?]>;
  appendEvent(runKey: string, eventsKey: string, ...argv: Arg[]): Promise<[string, string]>;
  recordInvocation(runKey: string, ledgerKey: string, ...argv: Arg[]): Promise<[string, string, string]>;
  /** KEYS: the script's own, then the run's other keys (`+` file: the count goes first). */
  createApproval(
    numberOfKeys: number,
    ...keysAndArgs: Arg[]
  ): Promise<[string, string, Array<string | number>]>;
  decideApproval(
    runKey: string,
    eventsKey: string,
    approvalsKey: string,
    grantsKey: string,
    ...argv: Arg[]
  ): Promise<[string, string, Array<string | number>]>;
  takeOverRun(
    runKey: string,
    eventsKey: string,
    approvalsKey: string,
    ...argv: Arg[]
  ): Promise<[string, string, Array<string | number>]>;
  consumeGrant(
    runKey: string,
    eventsKey: string,
    grantsKey: string,
    ...argv: Arg[]
  ): Promise<[string, string, Array<string | number>]>;
  settleRunDeadline(deadlinesKey: string, ...argv: Arg[]): Promise<number>;
  takeTurn(turnsKey: string, ...argv: Arg[]): Promise<[string, string, number]>;
  takeSessionSlot(tenantSlotsKey: string, keySlotsKey: string, ...argv: Arg[]): Promise<[string, string]>;
  passTurn(turnsKey: string, ...argv: Arg[]): Promise<[string, number]>;
  waitForProfile(
    runKey: string,
    eventsKey: string,
    ...argv: Arg[]
  ): Promise<[string, string, Array<string | number>]>;
  wakeRun(
    runKey: string,
    eventsKey: string,
    ...argv: Arg[]
  ): Promise<[string, string, Array<string | number>]>;
  expireStaleApprovals(
    runKey: string,
    approvalsKey: string,
    ...argv: Arg[]
  ): Promise<[string, string, string[], string[], string[]]>;
  recordStep(
    runKey: string,
    eventsKey: string,
    stepsKey: string,
    stepOrderKey: string,
    approvalsKey: string,
    ...argv: Arg[]
  ): Promise<[string, string | number]>;
  noteScreenshot(runKey: string, screenshotsKey: string, ...argv: Arg[]): Promise<string>;
  noteRunFile(runKey: string, filesKey: string, ...argv: Arg[]): Promise<string>;
  holdUpload(uploadKey: string, holdersKey: string, ...argv: Arg[]): Promise<string>;
  releaseUpload(uploadKey: string, holdersKey: string, ...argv: Arg[]): Promise<number>;
}

/**
 * The scripts that take their key count first (a `+` file: as many keys as the run owns). ioredis's
 * cluster auto-pipelining routes a command by its first argument, which for these is the count, not
 * a key; a cluster connection sends them on their own (queues/connection.ts).
 */
export const VARIADIC_KEY_SCRIPTS: readonly string[] = Object.freeze(
  readdirSync(LUA_DIR).flatMap((file) => {
    const match = SCRIPT_FILE.exec(file);
    return match?.[1] && match[3] ? [match[1]] : [];
  }),
);

/** `--- @include "includes/<name>.lua"`, as BullMQ marks the shared pieces of its scripts. */
const INCLUDE_LINE = /^--- @include "(includes\/[A-Za-z-]+\.lua)"$/gm;

/**
 * A script's source with each include line replaced by that file, so a piece every script needs
 * (appending a run event and notifying its streams) is written once. Includes do not nest.
 */
export function withIncludes(source: string): string {
  return source.replace(INCLUDE_LINE, (_line, path: string) => readFileSync(new URL(path, LUA_DIR), 'utf8'));
}

const loaded = new WeakSet<RedisClient>();

/**
 * Defines every Lua script under `lua/` as a command on `client` (EVALSHA with a fallback to
 * EVAL, as ioredis does). Each state change that spans keys is one of these scripts.
 */
export function withScripts(client: RedisClient): RedisClient & ScriptCommands {
  if (!loaded.has(client)) {
    for (const file of readdirSync(LUA_DIR)) {
      const match = SCRIPT_FILE.exec(file);
      if (!match?.[1] || !match[2]) continue;
      client.defineCommand(match[1], {
        numberOfKeys: match[3] ? undefined : Number(match[2]),
        lua: withIncludes(readFileSync(new URL(file, LUA_DIR), 'utf8')),
      });
    }
    loaded.add(client);
  }
  return client as RedisClient & ScriptCommands;
}
