import { resolve } from 'node:path';
import { type Config, egressLine, loadConfig } from '../../libs/config/index.js';
import { exitOnSignals, runMain, Shutdown } from '../../libs/shutdown/index.js';
import { createLogger } from '../../libs/telemetry/index.js';
import { startFleet } from './fleet.js';

const REDIS_SOURCES = {
  REDIS_CLUSTER_NODES: 'a Redis Cluster, from REDIS_CLUSTER_NODES',
  REDIS_URL: 'from REDIS_URL',
  local: 'the local server',
  private: 'a private redis-server, stopped on exit',
} as const;

/** Where the run artifacts go: the bucket and its prefix, or the local folder. */
function artifactsAt(config: Config): string {
  const { s3, dir } = config.artifacts;
  if (!s3) return `${resolve(dir)}   (local folder; LEASEHOLD_ARTIFACTS_S3_BUCKET for a bucket)`;
  return `s3://${s3.bucket}/${s3.prefix}${s3.endpoint ? `   (at ${s3.endpoint})` : ''}`;
}

runMain('fleet', async () => {
  const config = loadConfig();
  const logger = createLogger({ name: 'fleet', level: config.log.level, pretty: config.log.pretty });
  const shutdown = new Shutdown(logger);
  exitOnSignals(shutdown, { timeoutMs: config.shutdownTimeoutMs, logger });

  const fleet = await startFleet({ config, logger });
  shutdown.add('fleet', () => fleet.close());

  const { urls } = fleet;
  console.log(
    [
      '',
      'Leasehold fleet is up: api, browser worker, run worker, sweeper.',
      `  Runs page       ${urls.runs}   (sign in with the API key below)`,
      `  API             ${urls.api}`,
      `  API docs        ${urls.docs}`,
      `  Dashboard       ${urls.dashboard}`,
      `  Metrics         ${urls.metrics}`,
      `  Health          ${urls.api.replace(/\/v1$/, '')}/healthz   ${urls.api.replace(/\/v1$/, '')}/readyz`,
      `  Browser worker  ${urls.browserWorker}   (Chromium: ${fleet.chromium})`,
      `  Redis           ${urls.redis}   (${REDIS_SOURCES[fleet.redisSource]})`,
      `  Screenshots     ${artifactsAt(fleet.config)}`,
      `  Pages reach     ${egressLine(fleet.config).replace(/^egress: /, '')}`,
      `  API key         ${fleet.apiKey}   (tenant dev, every scope; new on each start)`,
      `  Dashboard key   ${fleet.operatorKey}   (fleet operator: the dashboard, no tenant's records)`,
      'Stop with Ctrl-C.',
      '',
    ].join('\n'),
  );
});
