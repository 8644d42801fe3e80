export { IntervalTask } from './interval-task.js';
export { runMain, StartupError } from './run-main.js';
export { exitOnSignals, Shutdown, type SignalOptions } from './shutdown.js';
