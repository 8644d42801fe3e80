/** The execution stopped because its signal aborted (the worker is shutting down): hand the run back. */
export class ExecutionInterrupted extends Error {
  override readonly name = 'ExecutionInterrupted';
}

export function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new ExecutionInterrupted('the execution was interrupted before its next call');
}
