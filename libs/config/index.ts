import { fileURLToPath } from 'node:url';
import type { z } from 'zod';
import { type Env, envSchema } from './env.js';
import { ADR_0127, WARM_CONTEXT_ESTIMATE_MB } from './lease-numbers.js';
import {
  type LimitsFile,
  loadLimitsFile,
  loadModelsFile,
  type ModelsFile,
  OpsFileError,
} from './ops-files.js';
import { isStrongSecret, type SecretLength } from './secret-strength.js';

export { decodeKey } from './env.js';
export { ADR_0127, WARM_CONTEXT_ESTIMATE_MB } from './lease-numbers.js';
export { checkLimits, type LimitsFile, type ModelsFile, OpsFileError } from './ops-files.js';

/** ADR-0127 d6: the upkeep renews leases due within five minutes, so it must pass at least twice in that window. */
export const LEASE_RENEW_WINDOW_MS = ADR_0127.renewWindowMs;

export interface Config {
  readonly nodeEnv: Env['NODE_ENV'];
  readonly log: { readonly level: Env['LOG_LEVEL']; readonly pretty: boolean | undefined };
  readonly redis: {
    readonly url: string | undefined;
    /**
     * A Redis Cluster's seed nodes as redis:// URLs (each `host:port` item made one),
     * or undefined for one Redis at `url`.
     */
    readonly clusterNodes: readonly string[] | undefined;
    readonly keyPrefix: string;
    readonly queuePrefix: string;
    /** REDIS_ANSWER_TIMEOUT_MS: command timeout and liveness bound of every connection. */
    readonly answerTimeoutMs: number;
  };
  readonly http: {
    readonly host: string;
    readonly apiPort: number;
    readonly browserWorkerPort: number;
    readonly runWorkerPort: number;
    readonly sweeperPort: number;
    /** Failed authentications per client address per minute before 429 (both servers). */
    readonly authFailuresPerMinute: number;
  };
  readonly api: {
    /** Requests per second one key may make on average, and in one burst (see API_RATE_*). */
    readonly ratePerSecond: number;
    readonly rateBurst: number;
    /** Live API keys one tenant may hold, across replicas (API_KEYS_PER_TENANT). */
    readonly apiKeysPerTenant: number;
    /** Open event streams per API key, across replicas. */
    readonly eventStreamsPerKey: number;
    readonly eventStreamKeepAliveMs: number;
    /** An MCP client silent this long ends the run it drives `cancelled` (MCP_IDLE_TIMEOUT_MS). */
    readonly mcpIdleTimeoutMs: number;
    /** Open MCP sessions per tenant and per API key, across replicas (MCP_SESSIONS_PER_*). */
    readonly mcpSessionsPerTenant: number;
    readonly mcpSessionsPerKey: number;
    /** Run-page sessions one key holds; a new sign-in past it ends the oldest (UI_SESSIONS_PER_KEY). */
    readonly uiSessionsPerKey: number;
    /** Sign-ins one IPv4 /24 or IPv6 /64 may make a minute (SIGNINS_PER_MINUTE). */
    readonly signInsPerMinute: number;
    /** A profile sign-in's lease past its page's last heartbeat (PROFILE_SIGN_IN_LEASE_MS). */
    readonly profileSignInLeaseMs: number;
    /**
     * The API's origin as browsers reach it (API_PUBLIC_URL), or undefined: its listening address,
     * known once it listens (apps/api/public-origin.ts resolves both).
     */
    readonly publicUrl: string | undefined;
  };
  /** `off`: browser tools switched off on purpose (LEASEHOLD_BROWSER_TOOLS). */
  readonly browserTools: 'on' | 'off';
  readonly secrets: {
    readonly dataPlaneToken: string | undefined;
    /** base64 or hex; decode with `decodeKey`. */
    readonly sealKey: string | undefined;
    /** The seal keys LEASEHOLD_SEAL_KEY replaced (LEASEHOLD_SEAL_KEYS_PREVIOUS): they open, never seal. */
    readonly previousSealKeys: readonly string[];
    /** API keys of the models in ops/models.yaml, by model name, from each entry's `api_key_env`. */
    readonly modelApiKeys: Readonly<Record<string, string>>;
  };
  readonly browser: {
    readonly executable: string | undefined;
    readonly headless: boolean;
    readonly sandbox: boolean | undefined;
    readonly workerId: string;
    readonly pinnedProfiles: '*' | readonly string[];
    readonly workerUrl: string | undefined;
    readonly expirySweepIntervalMs: number;
    readonly heartbeatMs: number;
    /** Warm contexts kept per served profile (0: none). */
    readonly warmContexts: number;
    /** The warm contexts' memory bound in all, MiB (see WARM_CONTEXT_ESTIMATE_MB). */
    readonly warmPoolMb: number;
    /** Longest one screenshot capture may take, ms (BROWSER_SCREENSHOT_TIMEOUT_MS; tried twice). */
    readonly screenshotTimeoutMs: number;
  };
  readonly runWorker: {
    readonly concurrency: number;
    readonly lockDurationMs: number;
    readonly stalledIntervalMs: number;
    readonly maxStalledCount: number;
    readonly upkeepIntervalMs: number;
    /** The first wait before a run handed back after a fault is tried again (then doubling). */
    readonly handBackBaseMs: number;
  };
  readonly sweeper: { readonly intervalMs: number };
  /** Files in and out of runs (DESIGN §12), in bytes. */
  readonly files: {
    /** A download past it is cancelled (BROWSER_DOWNLOAD_MAX_BYTES). */
    readonly downloadMaxBytes: number;
    /** One run's downloads in all (RUN_DOWNLOADS_MAX_BYTES). */
    readonly runDownloadsMaxBytes: number;
    /** The largest upload `POST /v1/files` takes (UPLOAD_MAX_BYTES). */
    readonly uploadMaxBytes: number;
  };
  /** Schedules: the least time between two fires of one schedule (SCHEDULE_MIN_INTERVAL_MS). */
  readonly schedules: { readonly minIntervalMs: number };
  /** A person on a run's page. */
  readonly person: {
    /**
     * How long a run's request for a person waits for a takeover before the run fails
     * `person_timeout` (PERSON_REQUEST_TIMEOUT_MS); never past the run's deadline or its lease's
     * sixty minutes (ADR-0127 d5).
     */
    readonly requestTimeoutMs: number;
    /** How long one takeover holds the page before it is handed back by itself (PERSON_CONTROL_TIMEOUT_MS). */
    readonly controlTimeoutMs: number;
  };
  /** Where run artifacts go (a local folder, or an S3-compatible bucket when named). */
  readonly artifacts: {
    readonly dir: string;
    readonly s3:
      | {
          readonly bucket: string;
          readonly endpoint: string | undefined;
          readonly region: string;
          readonly prefix: string;
        }
      | undefined;
  };
  /** How long an ended run (record, steps, events, artifacts) is kept, in ms. */
  readonly runRetentionMs: number;
  readonly webhooks: { readonly allowPrivate: boolean };
  /**
   * What the fleet sends out may reach (DESIGN §12): public addresses, the `allowCidrs` ranges
   * (LEASEHOLD_EGRESS_ALLOW_CIDRS, or its default: loopback outside production, none in it) and,
   * on those, never `ownPorts` — the configured server ports and Redis's. Ports chosen at start
   * (port 0) are added by the servers that listen on them.
   */
  readonly egress: {
    readonly allowCidrs: readonly string[];
    readonly allowSource: 'LEASEHOLD_EGRESS_ALLOW_CIDRS' | 'default';
    readonly ownPorts: readonly number[];
  };
  readonly shutdownTimeoutMs: number;
  readonly limits: LimitsFile;
  readonly models: ModelsFile;
}

/** A setting that stops the process: its message is the one line an operator reads. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

const SECRET_NAME = /TOKEN|KEY|PASSWORD|SECRET/;

function describeIssue(issue: z.core.$ZodIssue, env: Record<string, string | undefined>): string {
  const name = String(issue.path[0] ?? '');
  const raw = env[name];
  const found =
    raw === undefined
      ? 'it is unset'
      : SECRET_NAME.test(name)
        ? 'got a value that does not fit'
        : `got "${raw.replace(/\/\/[^@/\s]*@/g, '//***@')}"`;
  return `${name}: expected ${issue.message.replace(/^Invalid input: expected /, '')}; ${found}`;
}

export const DEFAULT_OPS_DIR = fileURLToPath(new URL('../../ops/', import.meta.url));

/**
 * Parses the environment (and ops/limits.yaml, ops/models.yaml) once, checks the rules that hold
 * between settings, and returns a frozen config. Throws {@link ConfigError} with one line naming
 * the variable and what was expected.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    throw new ConfigError(`invalid configuration: ${first ? describeIssue(first, env) : 'unknown problem'}`);
  }
  const e = parsed.data;
  if (e.NODE_ENV === 'production') checkProductionSecrets(env);
  if (e.LEASE_UPKEEP_INTERVAL_MS * 2 > LEASE_RENEW_WINDOW_MS) {
    throw new ConfigError(
      `invalid configuration: LEASE_UPKEEP_INTERVAL_MS: expected at most ${LEASE_RENEW_WINDOW_MS / 2} (half the five-minute renew window); got "${e.LEASE_UPKEEP_INTERVAL_MS}"`,
    );
  }
  if (e.BROWSER_WARM_CONTEXTS > 0 && e.BROWSER_WARM_POOL_MB < WARM_CONTEXT_ESTIMATE_MB) {
    throw new ConfigError(
      `invalid configuration: BROWSER_WARM_POOL_MB: expected at least ${WARM_CONTEXT_ESTIMATE_MB} (one warm context) while BROWSER_WARM_CONTEXTS is ${e.BROWSER_WARM_CONTEXTS}, or BROWSER_WARM_CONTEXTS=0; got "${e.BROWSER_WARM_POOL_MB}"`,
    );
  }
  if (e.RUN_STALLED_INTERVAL_MS > e.RUN_LOCK_DURATION_MS * 4) {
    throw new ConfigError(
      `invalid configuration: RUN_STALLED_INTERVAL_MS: expected at most 4 × RUN_LOCK_DURATION_MS (${e.RUN_LOCK_DURATION_MS * 4}); got "${e.RUN_STALLED_INTERVAL_MS}"`,
    );
  }
  const clusterNodes = compileClusterNodes(e);
  const opsDir = e.LEASEHOLD_OPS_DIR ?? DEFAULT_OPS_DIR;
  let limits: LimitsFile;
  let models: ModelsFile;
  try {
    limits = loadLimitsFile(opsDir);
    models = loadModelsFile(opsDir);
  } catch (error) {
    if (error instanceof OpsFileError) throw new ConfigError(`invalid configuration: ${error.message}`);
    throw error;
  }

  return deepFreeze({
    nodeEnv: e.NODE_ENV,
    person: { requestTimeoutMs: e.PERSON_REQUEST_TIMEOUT_MS, controlTimeoutMs: e.PERSON_CONTROL_TIMEOUT_MS },
    log: { level: e.LOG_LEVEL, pretty: e.LOG_PRETTY },
    redis: {
      url: e.REDIS_URL,
      clusterNodes,
      keyPrefix: e.LEASEHOLD_KEY_PREFIX,
      queuePrefix: e.QUEUE_PREFIX,
      answerTimeoutMs: e.REDIS_ANSWER_TIMEOUT_MS,
    },
    http: {
      host: e.HOST,
      apiPort: e.PORT,
      browserWorkerPort: e.BROWSER_WORKER_PORT,
      runWorkerPort: e.RUN_WORKER_PORT,
      sweeperPort: e.SWEEPER_PORT,
      authFailuresPerMinute: e.AUTH_FAILURES_PER_MINUTE,
    },
    api: {
      ratePerSecond: e.API_RATE_PER_SECOND,
      rateBurst: e.API_RATE_BURST,
      apiKeysPerTenant: e.API_KEYS_PER_TENANT,
      eventStreamsPerKey: e.EVENT_STREAMS_PER_KEY,
      eventStreamKeepAliveMs: e.EVENT_STREAM_KEEPALIVE_MS,
      mcpIdleTimeoutMs: e.MCP_IDLE_TIMEOUT_MS,
      mcpSessionsPerTenant: e.MCP_SESSIONS_PER_TENANT,
      mcpSessionsPerKey: e.MCP_SESSIONS_PER_KEY,
      uiSessionsPerKey: e.UI_SESSIONS_PER_KEY,
      signInsPerMinute: e.SIGNINS_PER_MINUTE,
      profileSignInLeaseMs: e.PROFILE_SIGN_IN_LEASE_MS,
      publicUrl: e.API_PUBLIC_URL,
    },
    browserTools: e.LEASEHOLD_BROWSER_TOOLS,
    secrets: {
      dataPlaneToken: e.LEASEHOLD_DATA_PLANE_TOKEN,
      sealKey: e.LEASEHOLD_SEAL_KEY,
      previousSealKeys: e.LEASEHOLD_SEAL_KEYS_PREVIOUS,
      modelApiKeys: modelApiKeys(models, env),
    },
    browser: {
      executable: e.BROWSER_EXECUTABLE,
      headless: e.BROWSER_HEADLESS,
      sandbox: e.BROWSER_SANDBOX,
      workerId: e.BROWSER_WORKER_ID,
      pinnedProfiles: e.BROWSER_WORKER_PROFILES,
      workerUrl: e.BROWSER_WORKER_URL,
      expirySweepIntervalMs: e.LEASE_EXPIRY_SWEEP_INTERVAL_MS,
      heartbeatMs: e.BROWSER_WORKER_HEARTBEAT_MS,
      warmContexts: e.BROWSER_WARM_CONTEXTS,
      warmPoolMb: e.BROWSER_WARM_POOL_MB,
      screenshotTimeoutMs: e.BROWSER_SCREENSHOT_TIMEOUT_MS,
    },
    runWorker: {
      concurrency: e.RUN_WORKER_CONCURRENCY,
      lockDurationMs: e.RUN_LOCK_DURATION_MS,
      stalledIntervalMs: e.RUN_STALLED_INTERVAL_MS,
      maxStalledCount: e.RUN_MAX_STALLED_COUNT,
      upkeepIntervalMs: e.LEASE_UPKEEP_INTERVAL_MS,
      handBackBaseMs: e.RUN_HANDBACK_BASE_MS,
    },
    sweeper: { intervalMs: e.SWEEP_INTERVAL_MS },
    files: {
      downloadMaxBytes: e.BROWSER_DOWNLOAD_MAX_BYTES,
      runDownloadsMaxBytes: e.RUN_DOWNLOADS_MAX_BYTES,
      uploadMaxBytes: e.UPLOAD_MAX_BYTES,
    },
    schedules: { minIntervalMs: e.SCHEDULE_MIN_INTERVAL_MS },
    artifacts: {
      dir: e.LEASEHOLD_ARTIFACTS_DIR,
      s3: e.LEASEHOLD_ARTIFACTS_S3_BUCKET
        ? {
            bucket: e.LEASEHOLD_ARTIFACTS_S3_BUCKET,
            endpoint: e.LEASEHOLD_ARTIFACTS_S3_ENDPOINT,
            region: e.LEASEHOLD_ARTIFACTS_S3_REGION,
            prefix: e.LEASEHOLD_ARTIFACTS_S3_PREFIX,
          }
        : undefined,
    },
    runRetentionMs: Math.round(e.RUN_RETENTION_DAYS * 86_400_000),
    webhooks: { allowPrivate: e.LEASEHOLD_WEBHOOKS_ALLOW_PRIVATE },
    egress: compileEgress(e, clusterNodes),
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    limits,
    models,
  });
}

/**
 * The production rule of each shared secret, and how an operator makes one that passes; a list
 * setting (`each`) holds comma-separated secrets, each checked by the rule.
 */
const PRODUCTION_SECRETS: ReadonlyArray<[name: string, length: SecretLength, rule: string, form?: 'each']> = [
  ['LEASEHOLD_DATA_PLANE_TOKEN', { minBytes: 32 }, 'hex or base64 decoding to at least 32 bytes'],
  ['LEASEHOLD_SEAL_KEY', { exactBytes: 32 }, 'hex or base64 decoding to exactly 32 bytes'],
  [
    'LEASEHOLD_SEAL_KEYS_PREVIOUS',
    { exactBytes: 32 },
    'keys of hex or base64 each decoding to exactly 32 bytes',
    'each',
  ],
];

/**
 * In production a shared secret that is set must be a real one (libs/config/secret-strength.ts):
 * a row of spaces, a placeholder or one character repeated stops the start with one line that
 * names the setting, never its value. An empty value is unset, answered where the secret is needed.
 */
function checkProductionSecrets(env: Record<string, string | undefined>): void {
  for (const [name, length, rule, form] of PRODUCTION_SECRETS) {
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    const values = form === 'each' ? raw.split(',').filter((value) => value.trim() !== '') : [raw];
    if (values.every((value) => isStrongSecret(value, length))) continue;
    throw new ConfigError(
      `invalid configuration: ${name}: expected in production ${rule}, not one character repeated (openssl rand -hex 32); got a value that does not fit`,
    );
  }
}

/**
 * The cluster's seed nodes as URLs, with the rules that hold between the Redis settings.
 * BullMQ's scripts touch several keys of a queue, so on a cluster its prefix must be a hash tag;
 * it is refused rather than defaulted to `{bull}`, because a fleet whose processes disagree on the
 * prefix would watch different queues without a word. Leasehold's key prefix must carry no hash
 * tag: it would put every record in one slot, on one master, and the cluster would hold nothing
 * on the others.
 */
function compileClusterNodes(e: Env): readonly string[] | undefined {
  if (e.REDIS_CLUSTER_NODES.length === 0) return undefined;
  if (e.REDIS_URL)
    throw new ConfigError(
      'invalid configuration: REDIS_CLUSTER_NODES: expected it or REDIS_URL, not both; both are set',
    );
  if (!/^\{.+\}$/.test(e.QUEUE_PREFIX))
    throw new ConfigError(
      `invalid configuration: QUEUE_PREFIX: expected a hash tag such as "{bull}" on a Redis Cluster (REDIS_CLUSTER_NODES is set), so each queue's keys share one slot; got "${e.QUEUE_PREFIX}"`,
    );
  if (/[{}]/.test(e.LEASEHOLD_KEY_PREFIX))
    throw new ConfigError(
      `invalid configuration: LEASEHOLD_KEY_PREFIX: expected no { } on a Redis Cluster (records carry their own hash tags; one in the prefix puts them all on one node); got "${e.LEASEHOLD_KEY_PREFIX}"`,
    );
  return e.REDIS_CLUSTER_NODES.map((node) => (/^rediss?:\/\//.test(node) ? node : `redis://${node}`));
}

/** Outside production, loopback: `npm start` and local pages work as they are, and the fleet says so. */
const EGRESS_DEFAULT_OUTSIDE_PRODUCTION = ['127.0.0.0/8', '::1/128'];

function compileEgress(e: Env, clusterNodes: readonly string[] | undefined): Config['egress'] {
  const redisUrls = clusterNodes ?? [e.REDIS_URL ?? 'redis://127.0.0.1:6379'];
  const redisPorts = redisUrls.map((url) => Number(new URL(url).port || '6379'));
  const ports = [e.PORT, e.BROWSER_WORKER_PORT, e.RUN_WORKER_PORT, e.SWEEPER_PORT, ...redisPorts];
  return {
    allowCidrs:
      e.LEASEHOLD_EGRESS_ALLOW_CIDRS ??
      (e.NODE_ENV === 'production' ? [] : EGRESS_DEFAULT_OUTSIDE_PRODUCTION),
    allowSource: e.LEASEHOLD_EGRESS_ALLOW_CIDRS === undefined ? 'default' : 'LEASEHOLD_EGRESS_ALLOW_CIDRS',
    ownPorts: [...new Set(ports.filter((port) => port > 0))].sort((a, b) => a - b),
  };
}

/** The start-up line naming what the egress guard allows beyond the internet, and why. */
export function egressLine(config: Config): string {
  const { allowCidrs, allowSource } = config.egress;
  if (allowCidrs.length === 0)
    return 'egress: public addresses only (LEASEHOLD_EGRESS_ALLOW_CIDRS names private ranges to allow)';
  const why =
    allowSource === 'default'
      ? `the default outside production; LEASEHOLD_EGRESS_ALLOW_CIDRS= (empty) allows none`
      : 'LEASEHOLD_EGRESS_ALLOW_CIDRS';
  return `egress: public addresses and ${allowCidrs.join(', ')} (${why}), never the fleet's own ports`;
}

/** Each model's API key, read from the variable its models.yaml entry names (never from a file). */
function modelApiKeys(models: ModelsFile, env: Record<string, string | undefined>): Record<string, string> {
  const keys: Record<string, string> = {};
  for (const [name, model] of Object.entries(models.models)) {
    const value = model.api_key_env ? env[model.api_key_env] : undefined;
    if (value) keys[name] = value;
  }
  return keys;
}

/**
 * Whether this process's runs get browser tools, checked when an API, run worker or
 * sweeper starts. `LEASEHOLD_BROWSER_TOOLS=off` disables them on purpose. Otherwise they need the
 * data-plane token: in production a process without one refuses to start ({@link ConfigError}), so
 * runs never silently go without a browser; elsewhere (development, tests) they are disabled and
 * the process says so. The fleet (`npm start`) makes a token of its own first.
 */
export function browserToolsState(config: Config): 'enabled' | 'disabled' {
  if (config.browserTools === 'off') return 'disabled';
  if (config.secrets.dataPlaneToken) return 'enabled';
  if (config.nodeEnv === 'production')
    throw new ConfigError(
      'invalid configuration: LEASEHOLD_DATA_PLANE_TOKEN: expected a token in production, or LEASEHOLD_BROWSER_TOOLS=off to run without browser tools; it is unset',
    );
  return 'disabled';
}

/** The start-up line naming the state and the setting behind it. */
export function browserToolsLine(config: Config): string {
  const state = browserToolsState(config);
  if (config.browserTools === 'off') return 'browser tools disabled (LEASEHOLD_BROWSER_TOOLS=off)';
  return state === 'enabled'
    ? 'browser tools enabled (LEASEHOLD_DATA_PLANE_TOKEN is set)'
    : 'browser tools disabled: LEASEHOLD_DATA_PLANE_TOKEN is unset (refused in production)';
}

/** A copy of `config` with some fields replaced, frozen again (tests and the fleet use it). */
export function withOverrides(
  config: Config,
  overrides: Partial<{ [K in keyof Config]: Partial<Config[K]> }>,
): Config {
  const merged: Record<string, unknown> = { ...config };
  for (const [key, value] of Object.entries(overrides)) {
    const current = (config as unknown as Record<string, unknown>)[key];
    merged[key] =
      current && typeof current === 'object' && !Array.isArray(current)
        ? { ...current, ...(value as object) }
        : value;
  }
  return deepFreeze(merged as unknown as Config);
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}
