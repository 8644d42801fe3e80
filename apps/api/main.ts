import { loadConfig } from '../../libs/config/index.js';
import { exitOnSignals, runMain, Shutdown } from '../../libs/shutdown/index.js';
import { createLogger, createMetrics } from '../../libs/telemetry/index.js';
import { redisTarget } from '../../queues/index.js';
import { startApi } from './server.js';

runMain('api', async () => {
  const config = loadConfig();
  const logger = createLogger({ name: 'api', level: config.log.level, pretty: config.log.pretty });
  const metrics = createMetrics({ role: 'api' });
  const shutdown = new Shutdown(logger);
  exitOnSignals(shutdown, { timeoutMs: config.shutdownTimeoutMs, logger });

  const api = await startApi({ config, logger, metrics, redisUrl: redisTarget(config.redis) });
  shutdown.add('api', () => api.close());
  logger.info(
    { url: api.url, runs: `${api.url}/runs`, docs: `${api.url}/docs`, dashboard: `${api.url}/admin/queues` },
    `api started; runs page ${api.url}/runs`,
  );
});
