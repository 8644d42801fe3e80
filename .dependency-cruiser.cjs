/**
 * The import direction of DESIGN §2, checked by `npm run deps` (part of `npm run check`).
 * Arrows point one way: apps → libs/queues; libs/runtime → libs/provider → libs/contracts;
 * libs/lease → libs/browser. libs/contracts and libs/config import no other lib; libs/egress only
 * libs/contracts.
 * @type {import('dependency-cruiser').IConfiguration}
 */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A cycle makes start-up order and test isolation depend on import order.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'libs-not-to-apps',
      severity: 'error',
      comment: 'A lib never imports an app.',
      from: { path: '^(libs|queues)/' },
      to: { path: '^apps/' },
    },
    {
      name: 'apps-not-to-other-apps',
      severity: 'error',
      comment: 'Each role stands alone; only apps/fleet composes the others.',
      from: { path: '^apps/([^/]+)/', pathNot: '^apps/fleet/' },
      to: { path: '^apps/', pathNot: '^apps/$1/' },
    },
    {
      name: 'leaf-libs-import-no-lib',
      severity: 'error',
      comment: 'libs/contracts and libs/config import no other lib and no queue.',
      from: { path: '^libs/(contracts|config)/' },
      to: { path: '^(libs|queues)/', pathNot: '^libs/$1/' },
    },
    {
      name: 'egress-guard-stands-alone',
      severity: 'error',
      comment:
        'libs/egress (the one address guard and the egress proxy, DESIGN §12) imports libs/contracts at most: webhooks, the API and the browser worker share it.',
      from: { path: '^libs/egress/' },
      to: { path: '^(libs|queues)/', pathNot: '^libs/(egress|contracts)/' },
    },
    {
      name: 'browser-engine-is-pure-playwright',
      severity: 'error',
      comment: 'The page engine never imports Redis, BullMQ, HTTP servers or the libs above it.',
      from: { path: '^libs/browser/' },
      to: {
        path: ['^libs/(store|lease|provider|runtime)/', '^queues/', 'node_modules/(ioredis|bullmq|fastify)/'],
      },
    },
    {
      name: 'provider-not-to-runtime',
      severity: 'error',
      comment: 'libs/runtime → libs/provider, never the other way.',
      from: { path: '^libs/provider/' },
      to: { path: '^libs/(runtime|models|lease|store|webhooks|sweeper|schedules|run-worker)/' },
    },
    {
      name: 'lease-not-to-run-side',
      severity: 'error',
      comment: 'The lease service rules know nothing of the run side.',
      from: { path: '^libs/lease/' },
      to: { path: '^libs/(runtime|provider|models|webhooks|sweeper|schedules|run-worker)/' },
    },
    // The layers, low to high: contracts and config; the libraries beside them (shutdown, egress,
    // artifacts, browser, telemetry, ui); lease; store (it keeps the lease service's records);
    // queues and provider; webhooks; runtime (the run loop and its tool dispatch); models (the
    // adapters behind the loop's model port); the sweeper, schedules and the run worker, each built
    // on the run loop; apps. An import goes down, never up.
    {
      name: 'side-libs-not-up',
      severity: 'error',
      comment:
        'shutdown, egress, artifacts, browser, telemetry and ui import only contracts, config and each other.',
      from: { path: '^libs/(shutdown|egress|artifacts|browser|telemetry|ui)/' },
      to: {
        path: [
          '^libs/(lease|store|provider|runtime|models|webhooks|sweeper|schedules|run-worker)/',
          '^queues/',
        ],
      },
    },
    {
      name: 'lease-not-up',
      severity: 'error',
      comment: 'The lease service defines the ports its store implements; it never imports the store.',
      from: { path: '^libs/lease/' },
      to: {
        path: ['^libs/(store|provider|runtime|models|webhooks|sweeper|schedules|run-worker)/', '^queues/'],
      },
    },
    {
      name: 'store-not-up',
      severity: 'error',
      comment: 'The records know nothing of the queues, the run side or its provider.',
      from: { path: '^libs/store/' },
      to: { path: ['^libs/(provider|runtime|models|webhooks|sweeper|schedules|run-worker)/', '^queues/'] },
    },
    {
      name: 'webhooks-not-up',
      severity: 'error',
      comment: 'Webhook delivery tells of runs; it knows nothing of the run loop or the roles built on it.',
      from: { path: '^libs/webhooks/' },
      to: { path: '^libs/(runtime|provider|models|sweeper|schedules|run-worker)/' },
    },
    {
      name: 'run-loop-not-up',
      severity: 'error',
      comment:
        'The run loop is what the sweeper, schedules and the run worker are built on, never the other way.',
      from: { path: '^libs/runtime/' },
      to: { path: '^libs/(models|sweeper|schedules|run-worker)/' },
    },
    {
      name: 'models-not-up',
      severity: 'error',
      comment:
        "A model adapter implements the run loop's model port; it knows nothing of pages, leases or the roles that choose it.",
      from: { path: '^libs/models/' },
      to: { path: ['^libs/(lease|provider|webhooks|sweeper|schedules|run-worker)/', '^queues/'] },
    },
    {
      name: 'sweeper-and-schedules-not-to-worker',
      severity: 'error',
      comment:
        'The maintenance role and the schedules hold no run worker of their own (a lease is kept by its worker).',
      from: { path: '^libs/(sweeper|schedules)/' },
      to: { path: '^libs/run-worker/' },
    },
    {
      name: 'nothing-imports-tests',
      severity: 'error',
      from: { path: '^(apps|libs|queues)/' },
      to: { path: '^test/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default'],
    },
  },
};
