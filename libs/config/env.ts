import { isIP } from 'node:net';
import { z } from 'zod';
import { ADR_0127 } from './lease-numbers.js';

/**
 * Every setting Leasehold reads from the environment. Names carry their unit (`…_MS`).
 * Parsed once at start-up by {@link loadConfig}; nothing below `apps/` reads `process.env`.
 */

const port = z.coerce.number().int().min(0).max(65_535);
const positiveMs = z.coerce.number().int().min(1);
const flag = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((value) => value === 'true' || value === '1' || value === 'yes');
const optionalText = z
  .string()
  .trim()
  .transform((value) => (value === '' ? undefined : value))
  .optional();

export const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** `true` forces pretty logs, `false` forces JSON; unset means pretty only on a TTY. */
  LOG_PRETTY: flag.optional(),

  /** Redis for queues and records. Unset: 127.0.0.1:6379 if it answers, else (fleet only) a private server. */
  REDIS_URL: z
    .url({ protocol: /^rediss?$/, error: 'a redis:// or rediss:// URL' })
    .optional()
    .or(z.literal('').transform(() => undefined)),
  /**
   * A Redis Cluster instead of one Redis: its seed nodes, comma-separated, each
   * `host:port` or a redis:// / rediss:// URL (user and password in a URL as in REDIS_URL; they
   * apply to every node). Excludes REDIS_URL. In cluster mode QUEUE_PREFIX must carry a hash tag.
   */
  REDIS_CLUSTER_NODES: z
    .string()
    .default('')
    .transform(splitList)
    .pipe(
      z.array(
        z
          .string()
          .regex(
            /^(?:rediss?:\/\/(?:[^@/\s]*@)?)?[A-Za-z0-9.:[\]_-]+:\d{1,5}\/?$/,
            'host:port or redis://[user:password@]host:port items',
          ),
      ),
    ),
  /**
   * How long Redis may take to answer before a role takes it for down: every non-blocking
   * connection's command timeout and the bound on each connection's liveness ping.
   */
  REDIS_ANSWER_TIMEOUT_MS: positiveMs.max(60_000).default(2_000),
  /** Prefix of Leasehold's own Redis keys. */
  LEASEHOLD_KEY_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_:{}-]{1,64}$/, 'letters, digits, _ : { } -')
    .default('lh:'),
  /**
   * Prefix of BullMQ's keys. On a Redis Cluster it must be a hash tag (`{bull}`), so each queue's
   * keys share a slot as BullMQ's scripts need.
   */
  QUEUE_PREFIX: z
    .string()
    .regex(
      /^(?:[A-Za-z0-9_-]{1,64}|\{[A-Za-z0-9_-]{1,62}\})$/,
      'letters, digits, _ - (or those in one {hash tag})',
    )
    .default('bull'),

  HOST: z.string().min(1).default('127.0.0.1'),
  /** The API (and, in the fleet, every role's /metrics). */
  PORT: port.default(3000),
  BROWSER_WORKER_PORT: port.default(3001),
  RUN_WORKER_PORT: port.default(3002),
  SWEEPER_PORT: port.default(3003),

  /**
   * Failed authentications one client address may make in a minute, on each server, before
   * further failures answer 429 (a right credential always passes). Counted in Redis.
   */
  AUTH_FAILURES_PER_MINUTE: z.coerce.number().int().min(1).max(1_000_000).default(20),
  /**
   * Requests one API key may make: a fixed window of API_RATE_BURST / API_RATE_PER_SECOND seconds
   * holding API_RATE_BURST requests (defaults 50/s, bursts of 100: 100 per 2 s), counted in Redis
   * across replicas. Health, readiness and metrics are not limited.
   */
  API_RATE_PER_SECOND: z.coerce.number().int().min(1).max(1_000_000).default(50),
  API_RATE_BURST: z.coerce.number().int().min(1).max(1_000_000).default(100),
  /**
   * Live API keys one tenant may hold (revoked ones do not count), counted in Redis across API
   * replicas: past it, `POST /v1/api-keys` answers 429 `rate_limited` with Retry-After until a key is
   * revoked. Too small and a tenant with many bots cannot give each its own key; too large and an
   * admin key in the wrong hands mints keys without end. The operator's `npm run api-key` is not
   * held to it, so a full tenant can always be reached.
   */
  API_KEYS_PER_TENANT: z.coerce.number().int().min(1).max(1_000_000).default(100),
  /** Event streams (SSE) one API key may hold open at once, across replicas; the next answers 429. */
  EVENT_STREAMS_PER_KEY: z.coerce.number().int().min(1).max(1_000_000).default(20),
  /** How often an open event stream gets a keep-alive comment (and its slot is renewed in Redis). */
  EVENT_STREAM_KEEPALIVE_MS: positiveMs.default(15_000),
  /**
   * MCP sessions one tenant may hold open at once, all its keys and API replicas together (counted
   * in Redis, each entry expiring unless its session renews it). Past it a new `initialize` answers
   * 429 `rate_limited` with Retry-After, so one tenant cannot fill an API process for the others.
   * Too small refuses a tenant's agents at busy times; too large lets one tenant hold the memory
   * of many sessions (each keeps its MCP server and transport) in the processes it reaches.
   */
  MCP_SESSIONS_PER_TENANT: z.coerce.number().int().min(1).max(1_000_000).default(64),
  /**
   * MCP sessions one API key may hold open at once, across replicas; the next `initialize` answers
   * 429 until one ends (DELETE) or idles out (15 minutes). Default 16.
   */
  MCP_SESSIONS_PER_KEY: z.coerce.number().int().min(1).max(1_000_000).default(16),
  /**
   * Run-page sessions (signed-in browsers) one API key may hold; a new sign-in past it ends the
   * key's oldest, so repeated sign-ins never pile up records (each lives 12 hours). Default 5.
   */
  UI_SESSIONS_PER_KEY: z.coerce.number().int().min(1).max(1_000).default(5),
  // How long a profile sign-in's lease lives past its page's last heartbeat (the page beats every 30 s).
  PROFILE_SIGN_IN_LEASE_MS: z.coerce
    .number()
    .int()
    .min(1_000)
    .max(15 * 60_000)
    .default(120_000),
  /**
   * Sign-ins (`POST /signin`, right key or wrong) one network may make a minute: an IPv4 /24 or an
   * IPv6 /64 counts as one, as one host commonly holds all of it. Counted in Redis across replicas;
   * past it 429 with Retry-After. Failed sign-ins also spend AUTH_FAILURES_PER_MINUTE, per network.
   */
  SIGNINS_PER_MINUTE: z.coerce.number().int().min(1).max(1_000_000).default(20),
  /**
   * The API's own origin as browsers reach it (`https://leasehold.example.com`), which a sign-in
   * form's `Origin` must match: another site's form is refused. Unset: http://HOST:PORT as it
   * listens (with HOST a loopback or any-address, also localhost, 127.0.0.1 and [::1] on that
   * port). Behind a proxy or a port mapping, set it, or the run pages' sign-in is refused.
   */
  API_PUBLIC_URL: optionalText.pipe(
    z
      .url({ protocol: /^https?$/, error: 'an http(s) URL' })
      .refine((value) => /^https?:\/\/[^/?#]+\/?$/.test(value), 'an origin: scheme, host and port, no path')
      .transform((value) => new URL(value).origin)
      .optional(),
  ),
  /**
   * MCP browser mode: how long a run driven by an MCP client waits for the client's next
   * call before it ends `cancelled` and releases its lease. Too small and a client whose own model
   * thinks slowly loses its run; too large and a client gone holds its profile's page that long.
   */
  MCP_IDLE_TIMEOUT_MS: positiveMs.default(300_000),
  /**
   * How long a run that asked for a person (`browser.request_person`) waits for someone to take
   * its page over before it fails `person_timeout`. Never past the run's deadline or its lease's
   * sixty minutes. Too small and an owner away from the desk loses the run; too large and a run
   * nobody attends holds its profile's page that long.
   */
  PERSON_REQUEST_TIMEOUT_MS: positiveMs.max(3_600_000).default(1_800_000),
  /**
   * How long one takeover of a run's page lasts before it is handed back by itself. Too small and
   * a person signing in is cut off; too large and a forgotten takeover holds the run that long.
   */
  PERSON_CONTROL_TIMEOUT_MS: positiveMs.max(3_600_000).default(900_000),
  /**
   * `off` switches the browser tools off on purpose: no data-plane token is needed and runs get
   * none. `on` (the default) needs LEASEHOLD_DATA_PLANE_TOKEN; in production an API, run worker or
   * sweeper without one refuses to start, so runs never silently go without a browser.
   */
  LEASEHOLD_BROWSER_TOOLS: z.enum(['on', 'off']).default('on'),
  /**
   * Shared secret of the browser worker data plane (≥ 32 characters). The fleet makes one when
   * unset. In production it must decode (hex or base64) to at least 32 bytes and not be one
   * character repeated (`openssl rand -hex 32`): see libs/config/secret-strength.ts.
   */
  LEASEHOLD_DATA_PLANE_TOKEN: optionalText.pipe(z.string().min(32, 'at least 32 characters').optional()),
  /**
   * AES-256-GCM key for sealed profile state: 32 bytes, base64 or hex. The fleet makes one when
   * unset. In production also not one character repeated (`openssl rand -hex 32`).
   */
  LEASEHOLD_SEAL_KEY: optionalText.pipe(
    z
      .string()
      .refine((value) => decodeKey(value) !== undefined, '32 bytes as 64 hex digits or base64')
      .optional(),
  ),
  /**
   * The seal keys LEASEHOLD_SEAL_KEY replaced, comma-separated, each written as that key is (32
   * bytes, hex or base64; the same production rule). A browser worker opens sealed state that
   * names one of them and seals it again with LEASEHOLD_SEAL_KEY on its lease's next clean close;
   * nothing is sealed with them. Keep a key here until every profile it sealed has been closed
   * cleanly once: state that names a key no worker holds fails `seal_key_mismatch`.
   */
  LEASEHOLD_SEAL_KEYS_PREVIOUS: z
    .string()
    .default('')
    .transform(splitList)
    .pipe(
      z
        .array(
          z
            .string()
            .refine((value) => decodeKey(value) !== undefined, 'each 32 bytes as 64 hex digits or base64'),
        )
        .max(8, 'at most 8 keys'),
    ),

  /** Chromium to launch. Unset: Playwright's own if installed, else the system's. */
  BROWSER_EXECUTABLE: optionalText,
  BROWSER_HEADLESS: flag.default(true),
  /** Chromium's own sandbox. Unset: on, except as root (where Chromium cannot use it). Containers turn it off: they are the boundary. */
  BROWSER_SANDBOX: flag.optional(),
  /** This browser worker's id, stable for its pinned group; it names the worker in lease provider references. */
  BROWSER_WORKER_ID: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ -')
    .default('browser-1'),
  /**
   * Profiles pinned to this browser worker: `*`, or a comma-separated list of `tenant/id` (one
   * profile) and `tenant/*` (every profile of a tenant). Profile ids are unique within a tenant only.
   */
  BROWSER_WORKER_PROFILES: z
    .string()
    .default('*')
    .transform((value) => (value.trim() === '*' ? '*' : splitList(value)))
    .pipe(
      z.union([
        z.literal('*'),
        z
          .array(
            z.string().regex(/^[A-Za-z0-9_-]{1,64}\/(?:[A-Za-z0-9_-]{1,64}|\*)$/, 'tenant/id or tenant/*'),
          )
          .min(1),
      ]),
    ),
  /**
   * Ready browser contexts (each with its page, the sealed state restored and the origin
   * guard attached) a browser worker keeps per profile it serves, so an acquire hands one over
   * instead of creating it; 0 turns them off. One (the default) is enough: a profile has one live
   * lease at a time, and a seal makes every warm context of its profile stale. They are made in
   * the background only while the leases' pages are quiet (libs/lease/page-activity.ts): made
   * eagerly, 4 a profile starved live pages on a 2-core machine (test/chaos/fifty-runs). Each costs
   * memory, which BROWSER_WARM_POOL_MB bounds.
   */
  BROWSER_WARM_CONTEXTS: z.coerce.number().int().min(0).max(64).default(1),
  /**
   * Memory the warm contexts of one browser worker may take in all, in MiB, at an
   * estimate of 48 MiB a context: at most BROWSER_WARM_POOL_MB / 48 contexts across its profiles.
   * Below 48 with warm contexts on, the start is refused (the pool could hold none).
   */
  BROWSER_WARM_POOL_MB: z.coerce.number().int().min(0).max(1_048_576).default(256),
  /**
   * Longest one screenshot capture may take, in ms. Screenshots are taken after the navigate or
   * act they show has answered (DESIGN §12), so this bounds no answer; it bounds how long the
   * lease's next call may wait behind a page that cannot paint, and a capture that runs out is
   * tried once more before its step shows `capture_timeout`. Too small and a loaded host loses
   * screenshots (a capture there measured 0.7 s; 2 s lost several a session); too large and a
   * frozen page holds its lease's next call up to twice this. Default 5 s; 1 ms to 60 s.
   */
  BROWSER_SCREENSHOT_TIMEOUT_MS: positiveMs.max(60_000).default(5_000),
  /**
   * A download a lease's page starts is cancelled once more than this many bytes are announced or
   * have arrived (DESIGN §12). Default 50 MiB; at most 1 GiB (the worker holds a file in memory
   * while it hashes and stores it).
   */
  BROWSER_DOWNLOAD_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1)
    .max(1024 ** 3)
    .default(50 * 1024 * 1024),
  /** What one run's downloads may keep in all, in bytes; past it a download is cancelled. Default 200 MiB. */
  RUN_DOWNLOADS_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1)
    .max(64 * 1024 ** 3)
    .default(200 * 1024 * 1024),
  /**
   * The largest file `POST /v1/files` takes, in bytes; a larger one is refused 413 and nothing is
   * kept. The API holds an upload in memory while it hashes and stores it, so this bounds that too.
   * Default 25 MiB; at most 1 GiB.
   */
  UPLOAD_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1)
    .max(1024 ** 3)
    .default(25 * 1024 * 1024),
  /** How often a browser worker closes its expired leases, unsealed. */
  LEASE_EXPIRY_SWEEP_INTERVAL_MS: positiveMs.default(2_000),
  /** How often a browser worker renews its registration; the record lives three times this. */
  BROWSER_WORKER_HEARTBEAT_MS: positiveMs.default(5_000),
  /**
   * The data-plane URL this browser worker advertises. Unset: http://<hostname>:BROWSER_WORKER_PORT
   * when HOST is 0.0.0.0 or :: (the start is refused when the name does not resolve), else
   * http://HOST:BROWSER_WORKER_PORT.
   */
  BROWSER_WORKER_URL: z.url().optional(),

  /** Runs one run-worker process works at once. */
  RUN_WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(1_000).default(8),
  /** BullMQ job lock; a worker that stops renewing it for this long is stalled. */
  RUN_LOCK_DURATION_MS: positiveMs.default(30_000),
  /** How often BullMQ checks for stalled jobs. */
  RUN_STALLED_INTERVAL_MS: positiveMs.default(30_000),
  /** The worker retry limit: times a stalled run is handed to another worker before the sweeper fails it. */
  RUN_MAX_STALLED_COUNT: z.coerce.number().int().min(0).max(100).default(2),
  /**
   * The wait before a run handed back after a retryable fault (a lost Redis connection, a
   * browser worker out of reach) is tried again; each next wait is twice the last, five at most,
   * so an outage is waited out for 31 × this in all before the run fails.
   */
  RUN_HANDBACK_BASE_MS: positiveMs.max(60_000).default(1_000),
  /** The run worker's lease upkeep period (ADR-0127 d6: once a minute). */
  LEASE_UPKEEP_INTERVAL_MS: positiveMs.default(ADR_0127.upkeepIntervalMs),
  /** The sweeper's period. */
  SWEEP_INTERVAL_MS: positiveMs.default(5_000),
  /**
   * The least time between two fires of one schedule: a schedule whose cron or `every` would fire
   * sooner is refused. Tests lower it; below a second a fire's submit would outpace its own run.
   */
  SCHEDULE_MIN_INTERVAL_MS: positiveMs.min(1_000).default(60_000),
  /**
   * Longest a process takes to stop after SIGTERM/SIGINT before it forces its exit. A run worker
   * lets the tool calls it has in flight answer inside it (a slow page's navigate among them).
   */
  SHUTDOWN_TIMEOUT_MS: positiveMs.default(30_000),

  /**
   * Where screenshots and other run artifacts go. A local folder (made on start) unless
   * LEASEHOLD_ARTIFACTS_S3_BUCKET names an S3-compatible bucket (credentials from the AWS SDK's own
   * settings: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION…), which a fleet on several
   * machines needs: every role must reach the same store.
   */
  LEASEHOLD_ARTIFACTS_DIR: z.string().min(1).default('.leasehold/artifacts'),
  LEASEHOLD_ARTIFACTS_S3_BUCKET: optionalText,
  /** An S3-compatible endpoint (MinIO, R2…); unset: AWS itself. Path-style addressing when set. */
  LEASEHOLD_ARTIFACTS_S3_ENDPOINT: z.url().optional(),
  LEASEHOLD_ARTIFACTS_S3_REGION: z.string().min(1).default('us-east-1'),
  /** Key prefix inside the bucket. */
  LEASEHOLD_ARTIFACTS_S3_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_./-]{0,128}$/, 'letters, digits, _ . / -')
    .default('leasehold/'),
  /**
   * Days a run's record, steps, events and artifacts are kept after it ends (fractions
   * allowed); a running, queued or waiting run is never expired.
   */
  RUN_RETENTION_DAYS: z.coerce.number().positive().max(3650).default(30),
  /**
   * Webhooks may be registered for loopback and private addresses only when this is true (a local
   * receiver in development); by default such URLs are refused, so a tenant cannot aim the fleet's
   * deliveries at its own network.
   */
  LEASEHOLD_WEBHOOKS_ALLOW_PRIVATE: flag.default(false),

  /**
   * The loopback and private ranges (CIDRs, comma-separated: `10.0.0.0/8,fd00::/8`) that what the
   * fleet sends out — every request of the browser's pages — may reach; public addresses need
   * none. Unset: loopback (127.0.0.0/8, ::1/128) outside production, nothing in production. Empty:
   * nothing. The fleet's own ports stay refused on every range allowed here (DESIGN §12).
   */
  LEASEHOLD_EGRESS_ALLOW_CIDRS: z
    .string()
    .transform(splitList)
    .pipe(z.array(z.string().refine(isCidr, 'CIDRs such as 10.0.0.0/8 or fd00::/8, comma-separated')))
    .optional(),

  /** Folder of limits.yaml and models.yaml. */
  LEASEHOLD_OPS_DIR: z.string().min(1).optional(),
});

export type Env = z.output<typeof envSchema>;

function splitList(value: string): string[] {
  return value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item.length > 0);
}

/** `address/bits`, an IPv4 or IPv6 network and a prefix length its family allows. */
function isCidr(value: string): boolean {
  const [network = '', bits, extra] = value.split('/');
  const family = isIP(network);
  if (family === 0 || bits === undefined || extra !== undefined || !/^\d{1,3}$/.test(bits)) return false;
  return Number(bits) <= (family === 4 ? 32 : 128);
}

/** A 32-byte key from 64 hex digits or base64, else undefined. */
export function decodeKey(value: string): Buffer | undefined {
  const bytes = /^[0-9a-fA-F]{64}$/.test(value) ? Buffer.from(value, 'hex') : Buffer.from(value, 'base64');
  return bytes.length === 32 ? bytes : undefined;
}
