import { browserToolsState, loadConfig } from '../../libs/config/index.js';
import { exitOnSignals, runMain, Shutdown } from '../../libs/shutdown/index.js';
import { createLogger, createMetrics, createOpsServer } from '../../libs/telemetry/index.js';
import { redisTarget } from '../../queues/index.js';
import { startSweeper } from './sweeper.js';

runMain('sweeper', async () => {
  const config = loadConfig();
  const logger = createLogger({ name: 'sweeper', level: config.log.level, pretty: config.log.pretty });
  const metrics = createMetrics({ role: 'sweeper' });
  const shutdown = new Shutdown(logger);
  exitOnSignals(shutdown, { timeoutMs: config.shutdownTimeoutMs, logger });

  const sweeper = await startSweeper({
    config,
    logger,
    metrics,
    redisUrl: redisTarget(config.redis),
  });
  shutdown.add('sweeper', () => sweeper.close());
  // Readiness names whether this process's runs get browser tools.
  const browserTools = { name: `browser_tools:${browserToolsState(config)}`, check: async () => true };
  const ops = createOpsServer(logger, metrics.registry, () => [...sweeper.readiness(), browserTools]);
  await ops.listen({ host: config.http.host, port: config.http.sweeperPort });
  shutdown.add('ops-http', () => ops.close());
  logger.info(
    { metrics: `http://${config.http.host}:${config.http.sweeperPort}/metrics` },
    'sweeper started',
  );
});
