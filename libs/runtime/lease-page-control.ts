import { DataPlaneClient, ProviderError } from '../provider/index.js';
import type { BrowserWorkerRegistry, RedisLeaseStore } from '../store/index.js';
import type { RunPageControl, RunPageRef } from './person-page-control.js';

/** How long reading the page's URL before a takeover may take. */
const OBSERVE_URL_TIMEOUT_MS = 10_000;

export interface LeasePageControlDeps {
  leases: Pick<RedisLeaseStore, 'liveLeaseId' | 'getLease'>;
  registry: Pick<BrowserWorkerRegistry, 'findForProfile'>;
  /** The data-plane token; without one there is no page to hand over. */
  token: string | undefined;
  /** Tests: another fetch. */
  fetch?: typeof fetch;
}

/** {@link RunPageControl} over the data plane: the run's live lease found by its profile. */
export class LeasePageControl implements RunPageControl {
  readonly #deps: LeasePageControlDeps;

  constructor(deps: LeasePageControlDeps) {
    this.#deps = deps;
  }

  async currentUrl(run: RunPageRef): Promise<string | null> {
    const found = await this.#find(run);
    if (!found) return null;
    // A page that cannot be read is handed over all the same.
    return found.client
      .observe(
        found.lease.profile,
        found.lease.leaseId,
        {},
        { deadlineMs: Date.now() + OBSERVE_URL_TIMEOUT_MS },
      )
      .then((answer) => answer.observation.url)
      .catch(() => null);
  }

  async start(run: RunPageRef, holder: string, seconds: number) {
    const found = await this.#find(run);
    if (!found) return undefined;
    const answer = await found.client.startPersonControl(found.lease, { holder, seconds });
    return { sinceMs: answer.since_ms, untilMs: answer.until_ms };
  }

  async end(run: RunPageRef, holder: string) {
    const found = await this.#find(run);
    if (!found) return undefined;
    try {
      const answer = await found.client.endPersonControl(found.lease, { holder });
      return { endedAtMs: answer.ended_ms, inputs: answer.inputs, url: answer.url };
    } catch (error) {
      // No longer theirs (its time ran out on the data plane): the hand-back goes on without counts.
      if (error instanceof ProviderError) return undefined;
      throw error;
    }
  }

  async #find(run: RunPageRef) {
    const { leases, registry, token } = this.#deps;
    if (!run.browser_profile_id || !token) return undefined;
    const profile = { tenant: run.tenant, id: run.browser_profile_id };
    const leaseId = await leases.liveLeaseId(profile);
    const record = leaseId ? await leases.getLease(profile, leaseId) : undefined;
    if (record?.state !== 'live' || record.scope.run_id !== run.id) return undefined;
    const worker = await registry.findForProfile(profile);
    if (!worker) return undefined;
    const client = new DataPlaneClient({
      baseUrl: worker.url,
      token,
      ...(this.#deps.fetch ? { fetch: this.#deps.fetch } : {}),
    });
    return { client, lease: { profile, leaseId: record.id } };
  }
}
