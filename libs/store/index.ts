export { LeaderLock } from './leader-lock.js';
export { type ScriptCommands, withScripts } from './scripts.js';
