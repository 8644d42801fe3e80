import type { AddressInfo } from 'node:net';
import { openArtifactStore } from '../../libs/artifacts/index.js';
import { launchChromium, resolveChromium } from '../../libs/browser/index.js';
import { ConfigError, egressLine } from '../../libs/config/index.js';
import { EgressGuard, EgressProxy } from '../../libs/egress/index.js';
import { createDataPlaneServer, registerWorker, requireWorkerSecrets } from '../../libs/lease/http/index.js';
import { LeaseService, PageActivity, PlaywrightPageFactory, WarmPool } from '../../libs/lease/index.js';
import { IntervalTask, Shutdown } from '../../libs/shutdown/index.js';
import {
  BrowserWorkerRegistry,
  RedisLeaseStore,
  RunFileNotes,
  RunScreenshotNotes,
} from '../../libs/store/index.js';
import {
  createLeaseMetrics,
  FailedAuthLimiter,
  type ReadinessCheck,
  recordSettle,
} from '../../libs/telemetry/index.js';
import { redisLink } from '../../libs/telemetry/redis-link.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { type AdvertiseInput, advertisedUrl, localHostname } from './advertised-url.js';
import { ChromiumProcess } from './chromium-process.js';
import type { BrowserWorkerHandle, BrowserWorkerOptions } from './handle.js';
import { logDataPlaneTenant } from './log-tenant.js';

export type { BrowserWorkerHandle, BrowserWorkerOptions } from './handle.js';

/**
 * The browser worker: Chromium, the lease service over it, and the authenticated data plane
 * (libs/lease/http). What it holds is let go in the reverse of taking it (`Shutdown`): leave the
 * registry and stop sweeping, stop serving, revoke the leases whose pages go with this process,
 * close Chromium, then Redis. A start-up that fails part-way lets go of what it took.
 */
export async function startBrowserWorker(options: BrowserWorkerOptions): Promise<BrowserWorkerHandle> {
  const { config, logger, metrics } = options;
  const { workerId, pinnedProfiles } = config.browser;
  const { token, sealKeys } = requireWorkerSecrets(config.secrets);
  const log = logger.child({ component: 'browser-worker', worker_id: workerId });
  // Fingerprints only: what an operator compares with a `seal_key_mismatch` to find the key to add.
  log.info(
    { seal_key: sealKeys.fingerprint, previous_seal_keys: sealKeys.fingerprints.slice(1) },
    'seal keys',
  );
  // A URL no one could reach stops the start here, before Chromium is launched.
  const advertise: Omit<AdvertiseInput, 'port'> = {
    host: config.http.host,
    configuredUrl: config.browser.workerUrl,
    ...(await localHostname(config.http.host, config.browser.workerUrl)),
  };
  const planned = advertisedUrl({ ...advertise, port: config.http.browserWorkerPort });
  if (!planned.ok) throw new ConfigError(`invalid configuration: ${planned.message}`);
  const held = new Shutdown(log);
  // DESIGN §12: Chromium reaches the network only through the egress proxy, which connects to the
  // addresses the guard judged; never to the fleet's own ports (Redis's among them, as it is
  // reached here: a private redis-server's port is chosen at start).
  const egress = new EgressGuard({
    allowCidrs: config.egress.allowCidrs,
    ownPorts: [...config.egress.ownPorts, ...redisPorts(options.redisUrl)],
  });
  const proxy = await EgressProxy.start({ guard: egress, log });
  held.add('egress-proxy', () => proxy.close());
  log.info({ allow_cidrs: egress.allowCidrs, proxy: proxy.url }, egressLine(config));
  const chromium = resolveChromium(config.browser.executable, undefined, {
    headless: config.browser.headless,
  });
  // What Chromium's exit takes with it is let go through these, once the services exist.
  const restart: { lost(): Promise<void>; started(): void } = { lost: async () => {}, started: () => {} };
  const browsers = await ChromiumProcess.start(
    () =>
      launchChromium({
        executablePath: chromium.path,
        headless: config.browser.headless,
        sandbox: config.browser.sandbox,
        proxyServer: proxy.url,
      }),
    { lost: () => restart.lost(), started: () => restart.started() },
    log,
  ).catch(async (error: unknown) => {
    await held.close();
    throw error;
  });
  held.add('chromium', () => browsers.close());
  log.info(
    { executable: chromium.path, source: chromium.source, version: browsers.browser.version() },
    'chromium launched',
  );

  try {
    redisLink.configure(config.redis.answerTimeoutMs);
    const redis = await connectRedis(options.redisUrl, 'worker', `browser-worker-${workerId}`);
    held.add('redis', () => closeRedis(redis));
    const store = new RedisLeaseStore(redis, config.redis.keyPrefix);
    const ownRedis = redisLink.of([redis]);
    const leaseMetrics = createLeaseMetrics(metrics.registry);
    // ADR-0159: every settle of a lease's page is counted by tool and result.
    const currentBrowser = () => browsers.browser;
    const pages =
      options.pages?.(currentBrowser, proxy) ??
      new PlaywrightPageFactory(currentBrowser, { onSettle: recordSettle(leaseMetrics, log), egress: proxy });
    // Screenshots after navigate and act, under each lease's tenant and run.
    const artifacts = options.artifacts ?? (await openArtifactStore(config));
    // Ready contexts for the profiles served here, made while the pages are quiet;
    // disposed before Chromium closes.
    const activity = new PageActivity();
    const warmPool =
      config.browser.warmContexts > 0
        ? new WarmPool({
            pages,
            store,
            sealKey: sealKeys,
            limits: { perProfile: config.browser.warmContexts, poolMb: config.browser.warmPoolMb },
            logger: log,
            activity,
          })
        : undefined;
    if (warmPool) held.add('warm-pool', () => warmPool.close());
    const leases = new LeaseService({
      store,
      pages,
      ...(warmPool ? { warmPool } : {}),
      activity,
      workerId,
      pinnedProfiles,
      redisLink: ownRedis,
      sealKey: sealKeys,
      logger: log,
      metrics: leaseMetrics,
      ...(options.clock ? { clock: options.clock } : {}),
      ...(options.caps ? { caps: options.caps } : {}),
      artifacts: {
        store: artifacts,
        failures: leaseMetrics.screenshotFailures,
        // DESIGN §12: each screenshot's state, noted under its run for the step view.
        notes: new RunScreenshotNotes(redis, config.redis.keyPrefix),
        captureTimeoutMs: config.browser.screenshotTimeoutMs,
        log,
        // DESIGN §12: what the pages download is kept under the run, within the limits.
        files: {
          store: artifacts,
          notes: new RunFileNotes(redis, config.redis.keyPrefix),
          maxFileBytes: config.files.downloadMaxBytes,
          maxRunBytes: config.files.runDownloadsMaxBytes,
          log,
        },
      },
    });
    const revoked = await leases.revokeOrphans();
    if (revoked > 0) log.warn({ revoked }, 'revoked leases whose pages a previous run of this worker held');
    // Pages go with this process: their leases are revoked, unsealed, for the run side to see.
    held.add('leases', () => leases.shutdown());
    // And with an exited Chromium: the same revocation, then warm contexts from the new one.
    restart.lost = async () => {
      await leases.revokeHeld();
      await warmPool?.drain();
    };
    restart.started = () => warmPool?.rewarm();
    // The profiles pinned here by name are warmed from the start; any other on its first acquire.
    if (warmPool && pinnedProfiles !== '*')
      for (const pin of pinnedProfiles) {
        const [tenant, id] = pin.split('/');
        if (tenant && id && id !== '*') warmPool.want({ tenant, id });
      }

    const readiness = (): ReadinessCheck[] => [
      { name: 'browser_redis', check: async () => (await redis.ping()) === 'PONG' },
      { name: 'chromium', check: async () => browsers.connected },
    ];
    const app = createDataPlaneServer({
      logger: log,
      token,
      failures: new FailedAuthLimiter(redis, config.redis.keyPrefix, config.http.authFailuresPerMinute),
      leases,
      store,
      worker: { id: workerId, pinnedProfiles, browserVersion: browsers.browser.version() },
      metrics: metrics.registry,
      serveMetrics: metrics.served,
      readiness,
      egress,
      redisUp: () => ownRedis.up,
    });
    logDataPlaneTenant(app);
    held.add('data-plane', () => app.close());
    const url = await app.listen({ host: config.http.host, port: config.http.browserWorkerPort });
    egress.refusePort((app.server.address() as AddressInfo).port);
    const advertised = advertisedUrl({ ...advertise, port: (app.server.address() as AddressInfo).port });
    if (!advertised.ok) throw new ConfigError(`invalid configuration: ${advertised.message}`);
    log.info(
      { url: advertised.url, source: advertised.source },
      `advertises ${advertised.url} to run workers (from ${advertised.source})`,
    );

    const registration = await registerWorker({
      registry: new BrowserWorkerRegistry(redis, config.redis.keyPrefix),
      id: workerId,
      url: advertised.url,
      pinnedProfiles,
      heartbeatMs: config.browser.heartbeatMs,
      logger: log,
    });
    held.add('registration', () => registration.close());
    const expirySweep = new IntervalTask(
      'lease-expiry-sweep',
      config.browser.expirySweepIntervalMs,
      async () => {
        await leases.sweepExpired();
      },
      log,
    ).start();
    held.add('expiry-sweep', () => expirySweep.close());

    return {
      app,
      leases,
      store,
      pages,
      warmPool,
      artifacts,
      get browser() {
        return browsers.browser;
      },
      chromium: browsers,
      executablePath: chromium.path,
      url,
      advertisedUrl: advertised.url,
      readiness,
      egress,
      close: () => held.close(),
    };
  } catch (error) {
    await held.close();
    throw error;
  }
}

/** The ports of the Redis this worker reaches (the target the fleet resolved, not only the settings). */
function redisPorts(target: BrowserWorkerOptions['redisUrl']): number[] {
  const urls = typeof target === 'string' ? [target] : target.clusterNodes;
  return urls.map((url) => Number(new URL(url).port || '6379'));
}
