export { LeaderLock } from './leader-lock.js';
export { RedisLeaseStore } from './lease-store.js';
export { type ScriptCommands, withScripts } from './scripts.js';
export { type BrowserWorkerRecord, BrowserWorkerRegistry } from './worker-registry.js';
