import { openArtifactStore } from '../../libs/artifacts/index.js';
import { launchChromium, resolveChromium } from '../../libs/browser/index.js';
import { createDataPlaneServer, registerWorker, requireWorkerSecrets } from '../../libs/lease/http/index.js';
import { LeaseService, PlaywrightPageFactory } from '../../libs/lease/index.js';
import { IntervalTask, Shutdown } from '../../libs/lifecycle/index.js';
import { BrowserWorkerRegistry, RedisLeaseStore } from '../../libs/store/index.js';
import {
  createLeaseMetrics,
  FailedAuthLimiter,
  type ReadinessCheck,
  recordSettle,
} from '../../libs/telemetry/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import type { BrowserWorkerHandle, BrowserWorkerOptions } from './handle.js';

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
  const { token, sealKey } = requireWorkerSecrets(config.secrets);
  const log = logger.child({ component: 'browser-worker', worker_id: workerId });
  const held = new Shutdown(log);
  const chromium = resolveChromium(config.browser.executable);
  const browser = await launchChromium({
    executablePath: chromium.path,
    headless: config.browser.headless,
    sandbox: config.browser.sandbox,
  });
  held.add('chromium', () => browser.close());
  log.info(
    { executable: chromium.path, source: chromium.source, version: browser.version() },
    'chromium launched',
  );

  try {
    const redis = await connectRedis(options.redisUrl, 'worker', `browser-worker-${workerId}`);
    held.add('redis', () => closeRedis(redis));
    const store = new RedisLeaseStore(redis, config.redis.keyPrefix);
    const leaseMetrics = createLeaseMetrics(metrics.registry);
    // Issue 14 (ADR-0159): every settle of a lease's page is counted by tool and result.
    const pages =
      options.pages?.(browser) ??
      new PlaywrightPageFactory(browser, { onSettle: recordSettle(leaseMetrics, log) });
    // Issue 13: screenshots after navigate and act, under each lease's tenant and run.
    const artifacts = options.artifacts ?? (await openArtifactStore(config));
    const leases = new LeaseService({
      store,
      pages,
      workerId,
      pinnedProfiles,
      sealKey,
      logger: log,
      metrics: leaseMetrics,
      ...(options.clock ? { clock: options.clock } : {}),
      ...(options.caps ? { caps: options.caps } : {}),
      artifacts: { store: artifacts, failures: leaseMetrics.screenshotFailures, log },
    });
    const revoked = await leases.revokeOrphans();
    if (revoked > 0) log.warn({ revoked }, 'revoked leases whose pages a previous run of this worker held');
    // Pages go with this process: their leases are revoked, unsealed, for the run side to see.
    held.add('leases', () => leases.shutdown());

    const readiness = (): ReadinessCheck[] => [
      { name: 'browser_redis', check: async () => (await redis.ping()) === 'PONG' },
      { name: 'chromium', check: async () => browser.isConnected() },
    ];
    const app = createDataPlaneServer({
      logger: log,
      token,
      failures: new FailedAuthLimiter(redis, config.redis.keyPrefix, config.http.authFailuresPerMinute),
      leases,
      store,
      worker: { id: workerId, pinnedProfiles, browserVersion: browser.version() },
      metrics: metrics.registry,
      readiness,
    });
    held.add('data-plane', () => app.close());
    const url = await app.listen({ host: config.http.host, port: config.http.browserWorkerPort });

    const registration = await registerWorker({
      registry: new BrowserWorkerRegistry(redis, config.redis.keyPrefix),
      id: workerId,
      url: config.browser.workerUrl ?? url,
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
      artifacts,
      browser,
      executablePath: chromium.path,
      url,
      readiness,
      close: () => held.close(),
    };
  } catch (error) {
    await held.close();
    throw error;
  }
}
