/** A run refused this worker a write: it was cancelled, reclaimed or taken over elsewhere. */
export class RunLost extends Error {
  override readonly name = 'RunLost';
}

export function refusedUnlessOk(result: { ok: boolean; message?: string }, what: string): void {
  if (!result.ok) throw new RunLost(`${what}: ${result.message ?? 'refused'}`);
}
