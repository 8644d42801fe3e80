import type { FastifyInstance } from 'fastify';
import type { Browser } from 'playwright-core';
import type { ArtifactStore } from '../../libs/artifacts/index.js';
import type { Config } from '../../libs/config/index.js';
import type { EgressGuard, EgressProxy } from '../../libs/egress/index.js';
import type { LeaseCaps, LeaseService, LeaseStore, PageFactory, WarmPool } from '../../libs/lease/index.js';
import type { Logger, Metrics, ReadinessCheck } from '../../libs/telemetry/index.js';
import type { RedisTarget } from '../../queues/index.js';
import type { ChromiumProcess } from './chromium-process.js';

export interface BrowserWorkerOptions {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  /** Redis: a URL, or a cluster's nodes. */
  redisUrl: RedisTarget;
  /** Tests: a clock to cross lease caps without sleeping, and caps of their own. */
  clock?: () => number;
  caps?: LeaseCaps;
  /**
   * Tests and benchmarks: another page factory over the worker's Chromium (another after a
   * restart); `egress` opens each context's door of the egress proxy.
   */
  pages?: (browser: () => Browser, egress: EgressProxy) => PageFactory;
  /** Another artifact store than the configured one (the fleet shares one among its roles; tests). */
  artifacts?: ArtifactStore;
}

export interface BrowserWorkerHandle {
  app: FastifyInstance;
  leases: LeaseService;
  store: LeaseStore;
  pages: PageFactory;
  /** The warm contexts (undefined with BROWSER_WARM_CONTEXTS=0). */
  warmPool: WarmPool | undefined;
  /** Where the pages' screenshots go. */
  artifacts: ArtifactStore;
  /** The Chromium of now: another one once it exited and was started again. */
  readonly browser: Browser;
  chromium: ChromiumProcess;
  /** The Chromium binary this worker launched. */
  executablePath: string;
  /** The data-plane URL (http://host:port) as this process reaches it (Fastify's listen answer). */
  url: string;
  /** The URL it advertises to run workers (see `advertisedUrl`). */
  advertisedUrl: string;
  readiness(): ReadinessCheck[];
  /**
   * The address guard its pages' requests pass (DESIGN §12); the fleet refuses its API's port on
   * it once the API listens.
   */
  egress: EgressGuard;
  close(): Promise<void>;
}
