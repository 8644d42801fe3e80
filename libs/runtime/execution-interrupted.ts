import { LeaseholdError } from '../contracts/index.js';
/** The execution stopped because its signal aborted (the worker is shutting down): hand the run back. */
export class ExecutionInterrupted extends LeaseholdError<'interrupted'> {
  override readonly name = 'ExecutionInterrupted';
  constructor(message: string, options?: { cause?: unknown }) {
    super('interrupted', message, true, options);
  }
}

/** Before each call: a stopping worker (`stopSignal`) or an aborted execution hands the run back here. */
export function throwIfAborted(signal: AbortSignal, stopSignal?: AbortSignal): void {
  if (signal.aborted || stopSignal?.aborted)
    throw new ExecutionInterrupted('the execution was interrupted before its next call');
}
