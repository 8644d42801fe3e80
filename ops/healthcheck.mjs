// Container HEALTHCHECK: asks the role's own /healthz. The role is LEASEHOLD_ROLE; its port is the
// setting that role listens on.
const portSetting = {
  api: 'PORT',
  'browser-worker': 'BROWSER_WORKER_PORT',
  'run-worker': 'RUN_WORKER_PORT',
  sweeper: 'SWEEPER_PORT',
};
const defaults = { PORT: 3000, BROWSER_WORKER_PORT: 3001, RUN_WORKER_PORT: 3002, SWEEPER_PORT: 3003 };
const setting = portSetting[process.env.LEASEHOLD_ROLE ?? 'api'] ?? 'PORT';
const port = process.env[setting] ?? defaults[setting];
fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(3000) }).then(
  (response) => process.exit(response.ok ? 0 : 1),
  () => process.exit(1),
);
