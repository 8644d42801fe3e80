import { IntervalTask } from '../../shutdown/index.js';
import type { Logger } from '../../telemetry/index.js';

/** What the run side learns about a browser worker: where its data plane listens and whom it serves. */
export interface WorkerAdvert {
  id: string;
  url: string;
  /** `*`, or pins `tenant/id` and `tenant/*`. */
  pinnedProfiles: '*' | string[];
}

/** The registry the run side looks workers up in (`BrowserWorkerRegistry` in libs/store). */
export interface WorkerRegistryPort {
  heartbeat(record: WorkerAdvert, nowMs: number, ttlMs: number): Promise<void>;
  remove(id: string): Promise<void>;
}

export interface WorkerRegistrationOptions {
  registry: WorkerRegistryPort;
  id: string;
  /** The URL the run side should call: the configured one, else the one the server listens on. */
  url: string;
  pinnedProfiles: '*' | readonly string[];
  /** Heartbeat period. The record lives three periods, so one late beat does not drop the worker. */
  heartbeatMs: number;
  logger: Logger;
}

/** Registers the worker until `close()`, which stops the beats and then takes the record away. */
export interface WorkerRegistration {
  close(): Promise<void>;
}

/**
 * Announces this worker's data plane in the registry: one beat before it returns (so the run side
 * finds the worker as soon as it serves), then every `heartbeatMs`. A worker that dies without
 * closing drops out when its record lapses; one that closes leaves at once.
 */
export async function registerWorker(options: WorkerRegistrationOptions): Promise<WorkerRegistration> {
  const { registry, id, heartbeatMs } = options;
  const advert: WorkerAdvert = {
    id,
    url: options.url,
    pinnedProfiles: options.pinnedProfiles === '*' ? '*' : [...options.pinnedProfiles],
  };
  const heartbeat = new IntervalTask(
    'browser-worker-heartbeat',
    heartbeatMs,
    () => registry.heartbeat(advert, Date.now(), heartbeatMs * 3),
    options.logger,
  );
  await heartbeat.runOnce();
  heartbeat.start();
  let closing: Promise<void> | undefined;
  return {
    close() {
      closing ??= (async () => {
        await heartbeat.close();
        // Leaving is a courtesy: a record that stays lapses by itself within three beats.
        await registry.remove(id).catch(() => undefined);
      })();
      return closing;
    },
  };
}
