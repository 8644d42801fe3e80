import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import type { Cluster, Redis } from 'ioredis';
import { errorBody, frameworkErrorAnswer } from './http-errors.js';

/**
 * How a route lets callers in. Authentication is decided per ROUTE, after routing,
 * from the route's own mark — never from the raw URL, whose spelling (percent-encoding, absolute
 * form, double slashes, case) the router forgives and a prefix test does not:
 * - `public`: anyone (health, readiness, metrics, the API document);
 * - `own`: the route checks a credential of its own (the dashboard's gate; browser pages and
 *   `/mcp` later) — never public;
 * - unmarked (the default): the server's credential, checked before anything else runs. Unknown
 *   paths and router errors are unmarked too: a caller without a credential learns nothing, not
 *   even which paths exist.
 */
export type Door = 'public' | 'own';

declare module 'fastify' {
  interface FastifyContextConfig {
    door?: Door;
  }
}

/** Route config of a public route: `app.get('/healthz', { config: PUBLIC_ROUTE }, …)`. */
export const PUBLIC_ROUTE = { door: 'public' } as const satisfies { door: Door };

/** Marks every route later added to `instance` (a plugin's routes, which we cannot mark one by one). */
export function markDoor(instance: FastifyInstance, door: Door): void {
  instance.addHook('onRoute', (route) => {
    route.config = { ...route.config, door };
  });
}

/** The server's credential check, given to {@link guardDoors}. */
export interface DoorKeeper {
  /** The 401's message: what a refused caller must present, e.g. `a valid data-plane token is required`. */
  refusal: string;
  /** The `WWW-Authenticate` challenge of a 401. */
  challenge: string;
  /** True when the request presents a right credential (the keeper may remember who, on the request). */
  verify(request: FastifyRequest): Promise<boolean>;
  /** Counts failed authentications per client address. */
  failures: FailedAuthLimiter;
  /**
   * Start-up check of an unmarked route beyond the server's credential, e.g. the API's rule that
   * each one names the scope it needs. A route it refuses stops the server from starting.
   */
  routeGuarded?(route: RouteOptions): boolean;
}

/** The failed-authentication window: counts reset a minute after an address's first failure. */
export const AUTH_FAILURE_WINDOW_MS = 60_000;

/**
 * A budget of events per client address (or network) a minute, counted in Redis: one key per
 * address, made with its one-minute expiry (SET NX PX) and counted (INCR) in one MULTI, so a key
 * never outlives its window whatever fails in between, on any Redis version, shared by every
 * replica.
 */
export class AddressBudget {
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly keyPrefix: string,
    /** What is counted: the key's middle part (`auth-failures`, `signins`). */
    private readonly name: string,
    /** Events an address may make in a window before further ones are refused. */
    readonly perMinute: number,
  ) {}

  /** Counts one event; answers the wait in ms when the address is now over its budget. */
  async spend(address: string): Promise<number | undefined> {
    const key = `${this.keyPrefix}${this.name}:${address}`;
    const answers = await this.redis
      .multi()
      .set(key, '0', 'PX', AUTH_FAILURE_WINDOW_MS, 'NX')
      .incr(key)
      .pttl(key)
      .exec();
    const count = Number(answers?.[1]?.[1] ?? 0);
    if (count <= this.perMinute) return undefined;
    const ttlMs = Number(answers?.[2]?.[1] ?? AUTH_FAILURE_WINDOW_MS);
    return ttlMs > 0 ? ttlMs : AUTH_FAILURE_WINDOW_MS;
  }
}

/**
 * Failed authentications per client address ({@link AddressBudget} `auth-failures`). Only failures
 * count: a right credential always passes, so a tenant behind the same address as an attacker is
 * never locked out. The doors count per exact address; the run pages' sign-in per network
 * (`addressBlock`), since a host holds a whole IPv6 /64 or, on loopback, all of 127/8.
 */
export class FailedAuthLimiter extends AddressBudget {
  constructor(redis: Redis | Cluster, keyPrefix: string, perMinute: number) {
    super(redis, keyPrefix, 'auth-failures', perMinute);
  }

  /** Counts one failure; answers the wait in ms when the address is now over its limit. */
  fail(address: string): Promise<number | undefined> {
    return this.spend(address);
  }
}

/**
 * Answers a request whose credential is missing or wrong: 401 with `refusal`, or 429
 * `rate_limited` with Retry-After once its address is past its limit. For the doors, and for an
 * `own` route's gate (the dashboard) so its failures count the same.
 */
export async function refuseCredential(
  request: FastifyRequest,
  reply: FastifyReply,
  failures: FailedAuthLimiter,
  refusal: { refusal: string; challenge: string },
): Promise<void> {
  const waitMs = await failures.fail(request.ip);
  if (waitMs !== undefined) {
    const seconds = Math.max(1, Math.ceil(waitMs / 1000));
    await reply
      .code(429)
      .header('retry-after', String(seconds))
      .send(
        errorBody(
          'rate_limited',
          `too many failed authentications from this address; retry after ${seconds} s`,
        ),
      );
    return;
  }
  await reply
    .code(401)
    .header('www-authenticate', refusal.challenge)
    .send(errorBody('unauthorized', refusal.refusal));
}

const doorsByServer = new WeakMap<FastifyInstance, Doors>();

/**
 * Guards `app` (made by `createHttpServer`) with `keeper`: from now on every unmarked route,
 * unknown path and router error needs the keeper's credential.
 */
export function guardDoors(app: FastifyInstance, keeper: DoorKeeper): void {
  const doors = doorsByServer.get(app);
  if (!doors) throw new Error('guardDoors: the server was not made by createHttpServer');
  doors.keeper = keeper;
}

/**
 * The default-deny layer of one server, installed by `createHttpServer` before any route: an
 * `onRequest` hook (it runs after routing, for the not-found handler too), the router-error
 * answer (Fastify's `frameworkErrors`, which runs before any hook), and a start-up check that
 * refuses a route neither marked nor authenticated.
 */
export class Doors {
  keeper: DoorKeeper | undefined;
  private readonly routes: RouteOptions[] = [];

  constructor(private readonly bodyLimitBytes: number) {}

  install(app: FastifyInstance): void {
    doorsByServer.set(app, this);
    // Kept by reference: a plugin's own onRoute hook (markDoor) may mark a route after this one saw it.
    app.addHook('onRoute', (route) => {
      this.routes.push(route);
    });
    app.addHook('onReady', async () => {
      const unguarded = this.routes.filter((route) => !this.guarded(route));
      if (unguarded.length > 0)
        throw new Error(
          `routes neither marked public nor authenticated: ${unguarded
            .map((route) => `${[route.method].flat().join(',')} ${route.url}`)
            .join('; ')}`,
        );
    });
    app.addHook('onRequest', async (request, reply) => {
      const door = request.routeOptions.config?.door;
      if (door === 'public' || door === 'own') return;
      // Returning the sent reply ends the request here: no parsing, no handler (Fastify's early answer).
      if (!(await this.admit(request, reply))) return reply;
    });
  }

  private guarded(route: RouteOptions): boolean {
    const door = route.config?.door;
    if (door === 'public' || door === 'own') return true;
    if (!this.keeper) return false;
    return this.keeper.routeGuarded?.(route) ?? true;
  }

  /**
   * True when the request may go on; else the 401 (or 429 past the address's limit) is sent.
   * A server with no keeper has no protected routes, so its unknown paths answer 404 as usual.
   */
  private async admit(request: FastifyRequest, reply: FastifyReply): Promise<boolean> {
    const keeper = this.keeper;
    if (!keeper || (await keeper.verify(request))) return true;
    await refuseCredential(request, reply, keeper.failures, keeper);
    return false;
  }

  /**
   * Fastify's `frameworkErrors`: a URL the router cannot decode (`%ff`) or a path segment over
   * `maxParamLength`. Such a request never reaches a hook, so the credential is checked here:
   * a caller without one gets the same 401 as anywhere else.
   */
  readonly frameworkErrors = (error: FastifyError, request: FastifyRequest, reply: FastifyReply): void => {
    void (async () => {
      try {
        if (!(await this.admit(request, reply))) return;
        const { status, body } = frameworkErrorAnswer(error, this.bodyLimitBytes);
        await reply.code(status).send(body);
      } catch (failure) {
        request.log.error({ err: failure }, 'router error answer failed');
        if (!reply.sent) await reply.code(500).send(errorBody('internal', 'internal error'));
      }
    })();
  };
}
