import { browserToolsState, loadConfig } from '../../libs/config/index.js';
import { exitOnSignals, runMain, Shutdown } from '../../libs/shutdown/index.js';
import { createLogger, createMetrics, createOpsServer } from '../../libs/telemetry/index.js';
import { redisTarget } from '../../queues/index.js';
import { startRunWorker } from './run-worker.js';

runMain('run-worker', async () => {
  const config = loadConfig();
  const logger = createLogger({ name: 'run-worker', level: config.log.level, pretty: config.log.pretty });
  const metrics = createMetrics({ role: 'run-worker' });
  const shutdown = new Shutdown(logger);
  exitOnSignals(shutdown, { timeoutMs: config.shutdownTimeoutMs, logger });

  const runWorker = await startRunWorker({
    config,
    logger,
    metrics,
    redisUrl: redisTarget(config.redis),
  });
  shutdown.add('run-worker', () => runWorker.close());
  // Readiness names whether this process's runs get browser tools.
  const browserTools = { name: `browser_tools:${browserToolsState(config)}`, check: async () => true };
  const ops = createOpsServer(logger, metrics.registry, () => [...runWorker.readiness(), browserTools]);
  await ops.listen({ host: config.http.host, port: config.http.runWorkerPort });
  shutdown.add('ops-http', () => ops.close());
  logger.info(
    { metrics: `http://${config.http.host}:${config.http.runWorkerPort}/metrics` },
    'run worker started',
  );
});
