import { loadConfig } from '../../libs/config/index.js';
import { exitOnSignals, runMain, Shutdown } from '../../libs/shutdown/index.js';
import { createLogger, createMetrics } from '../../libs/telemetry/index.js';
import { redisTarget } from '../../queues/index.js';
import { startBrowserWorker } from './service.js';

runMain('browser-worker', async () => {
  const config = loadConfig();
  const logger = createLogger({ name: 'browser-worker', level: config.log.level, pretty: config.log.pretty });
  const metrics = createMetrics({ role: 'browser-worker' });
  const shutdown = new Shutdown(logger);
  exitOnSignals(shutdown, { timeoutMs: config.shutdownTimeoutMs, logger });

  const worker = await startBrowserWorker({
    config,
    logger,
    metrics,
    redisUrl: redisTarget(config.redis),
  });
  shutdown.add('browser-worker', () => worker.close());
  logger.info(
    { url: worker.url, advertised_url: worker.advertisedUrl, metrics: `${worker.url}/metrics` },
    'browser worker started',
  );
});
