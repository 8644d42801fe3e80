import type { RedisClient } from './redis-client.js';
import type { ScriptCommands } from './scripts.js';

/**
 * Where the run store keeps its records. The keys of one run share the hash tag `{run:ID}`, those
 * of one session `{ses:ID}` and those of one agent `{agt:ID}`, so every script touches one Redis
 * Cluster slot. `prefix` is the deployment's key prefix, colon included (`lh:`).
 */
export class RunKeys {
  constructor(private readonly prefix: string) {}

  /**
   * Hash: the leases one run worker keeps up (lease id → `tenant/profile id`). Its own slot per
   * worker: the upkeep reads one key, whatever else the fleet holds. A run's record names the
   * worker keeping its lease (`upkeep_by`), so a claim can move the lease to its new worker.
   */
  upkeepIndex(workerId: string): string {
    return `${this.prefix}{upkeep:${workerId}}:leases`;
  }
  /**
   * String: set once every live lease of the fleet is in some worker's upkeep index (the sweeper's
   * one fill after the index came in); while it is set no pass reads the fleet's leases again.
   */
  upkeepFilled(): string {
    return `${this.prefix}upkeep-index:filled`;
  }
  /** Hash: the run's record (status, owner, attempt, execution, usage, result…). */
  run(runId: string): string {
    return `${this.prefix}{run:${runId}}:run`;
  }
  /** Stream: the run's events, capped. */
  events(runId: string): string {
    return `${this.prefix}{run:${runId}}:events`;
  }
  /** Hash: invocation `a<attempt>:<step>:<index>` → ledger entry (JSON). */
  ledger(runId: string): string {
    return `${this.prefix}{run:${runId}}:ledger`;
  }
  /** List: the run's transcript (the model's context), the current attempt's. */
  transcript(runId: string): string {
    return `${this.prefix}{run:${runId}}:transcript`;
  }
  /** List: an earlier attempt's transcript, kept under its number when the run is retried. */
  attemptTranscript(runId: string, attempt: number): string {
    return `${this.prefix}{run:${runId}}:transcript:a${attempt}`;
  }
  /** Hash: approval id → approval (JSON). */
  approvals(runId: string): string {
    return `${this.prefix}{run:${runId}}:approvals`;
  }
  /** Hash: grant id → grant (JSON). */
  grants(runId: string): string {
    return `${this.prefix}{run:${runId}}:grants`;
  }
  /** String: the run loop's own state (the breaker's snapshot, JSON), apart so the record stays small. */
  loopState(runId: string): string {
    return `${this.prefix}{run:${runId}}:loop`;
  }
  /** Hash: step id → the step record (JSON). */
  steps(runId: string): string {
    return `${this.prefix}{run:${runId}}:steps`;
  }
  /** List: the run's step ids in the order they started (a step's `seq` is its place + 1). */
  stepOrder(runId: string): string {
    return `${this.prefix}{run:${runId}}:step-order`;
  }
  /**
   * Hash: the run's declared secrets (DESIGN §12): `sealed` (AES-256-GCM under the seal key, bound
   * to the tenant and run) and `declared` (their names and origins, JSON). Read by the browser
   * worker (`sealed`) and the run worker (`declared`); never by a route.
   */
  secrets(runId: string): string {
    return `${this.prefix}{run:${runId}}:secrets`;
  }
  /**
   * Hash: screenshot name → where it is (`pending`, `stored`, `failed <reason>`), written by the
   * browser worker that takes it after its call answered; expires with the run.
   */
  screenshots(runId: string): string {
    return `${this.prefix}{run:${runId}}:screenshots`;
  }
  /**
   * Hash: the run's downloads, file id → record (JSON), and `bytes` → the bytes they keep, written
   * by the browser worker that saw them; expires with the run.
   */
  files(runId: string): string {
    return `${this.prefix}{run:${runId}}:files`;
  }
  /**
   * Hash: an upload's record (its tenant, principal, name, type, size, SHA-256, creation). Expires
   * 7 days (`UPLOAD_UNUSED_TTL_MS`) after it was made unless a run holds it (see `uploadHolders`).
   */
  upload(fileId: string): string {
    return `${this.prefix}{fil:${fileId}}:file`;
  }
  /**
   * Sorted set: the runs whose input lists the upload, run id → when it was listed. While one is
   * named the record does not expire; the artifact sweep lets go of the runs that are gone.
   */
  uploadHolders(fileId: string): string {
    return `${this.prefix}{fil:${fileId}}:runs`;
  }
  /**
   * Every key a run owns, for retention and for counting: all in the run's slot. The
   * earlier attempts' transcripts are named by the run's attempt count.
   */
  runOwned(runId: string, attempts: number): string[] {
    const earlier = Array.from({ length: Math.max(0, attempts - 1) }, (_, index) =>
      this.attemptTranscript(runId, index + 1),
    );
    return [
      this.run(runId),
      this.events(runId),
      this.ledger(runId),
      this.transcript(runId),
      ...earlier,
      this.approvals(runId),
      this.grants(runId),
      this.loopState(runId),
      this.steps(runId),
      this.stepOrder(runId),
      this.secrets(runId),
      this.screenshots(runId),
      this.files(runId),
    ];
  }
  /** Hash: the session's record, fixed at creation. */
  session(sessionId: string): string {
    return `${this.prefix}{ses:${sessionId}}:session`;
  }
  /** Sorted set: the session's run ids by submission time. */
  sessionRuns(sessionId: string): string {
    return `${this.prefix}{ses:${sessionId}}:runs`;
  }
  /** Hash: the agent's record (tenant, latest version). */
  agent(agentId: string): string {
    return `${this.prefix}{agt:${agentId}}:agent`;
  }
  /** Hash: version → the definition's canonical JSON. Fields are written once. */
  agentVersions(agentId: string): string {
    return `${this.prefix}{agt:${agentId}}:versions`;
  }
  /** Hash: an API key's identity, under the SHA-256 of the key (the key itself is never stored). */
  apiKey(keyHash: string): string {
    return `${this.prefix}apikey:${keyHash}`;
  }
  /** String: the run an approval belongs to, so an approval id alone finds it. */
  approvalRun(approvalId: string): string {
    return `${this.prefix}{apr:${approvalId}}:run`;
  }
  /**
   * Pub/sub channel (plain, not sharded): each status event of the tenant's runs, with the run's id,
   * as `lua/includes/emit.lua` publishes it for the tenant's event stream.
   */
  tenantRunEvents(tenant: string): string {
    return `${this.prefix}tenant-runs:${tenant}`;
  }
  /** Pub/sub channel: the id of each running run whose cancel is requested. */
  cancelChannel(): string {
    return `${this.prefix}run-cancel`;
  }
  /**
   * Sorted set: the runs not yet known to have ended, scored by deadline (epoch ms), for the
   * sweeper. One key for the deployment, in a slot of its own (`{deadlines}`); written before each
   * run script that sets a deadline (submit, retry), so an entry may name a run not yet written or
   * already ended: the sweep reads the run's record and removes such entries.
   */
  runDeadlines(): string {
    return `${this.prefix}{deadlines}:runs`;
  }
  /**
   * Sorted set: a tenant's runs by submission time (epoch ms), for `GET /v1/runs`.
   * Written before the run's own script (intent first): a member whose record is missing or
   * expired reads as absent and is pruned by the reader.
   */
  tenantRuns(tenant: string): string {
    return `${this.prefix}{ten:${tenant}}:runs`;
  }
  /** Sorted set: a tenant's approvals that were pending when written (decided ones are pruned on read). */
  tenantApprovals(tenant: string): string {
    return `${this.prefix}{ten:${tenant}}:approvals`;
  }
}

/** What the run store's parts share: one client with the scripts, the keys, the clock. */
export interface RunStoreContext {
  readonly redis: RedisClient & ScriptCommands;
  readonly keys: RunKeys;
  /** Epoch ms; injected so tests move time without sleeping. */
  readonly now: () => number;
  /** Entries kept in a run's event stream (older ones are trimmed). */
  readonly eventsCap: number;
  /**
   * How long every key a run owns is kept after the run ends (`RUN_RETENTION_DAYS`):
   * the end script sets it as the keys' expiry; a retry takes it off again.
   */
  readonly retentionMs: number;
}
