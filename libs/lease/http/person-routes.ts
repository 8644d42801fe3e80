import type { FastifyInstance } from 'fastify';
import type { z } from 'zod';
import { EventStreamWriter } from '../../telemetry/index.js';
import type { LeaseService } from '../index.js';
import { registerOperation } from './route-registration.js';
import { leaseParams, DATA_PLANE_OPERATIONS as OPERATIONS } from './route-table.js';

type Parse = <T extends z.ZodType>(schema: T, value: unknown, where: string) => z.output<T>;

/**
 * A person on the lease's page: the live view's stream, person control and the holder's input
 * (LeasePersonCalls holds the rules). Frames and input pass through and are never logged.
 */
export function registerPersonRoutes(app: FastifyInstance, leases: LeaseService, parse: Parse): void {
  const lease = (params: unknown) => {
    const path = parse(leaseParams, params, 'path');
    return { profile: { tenant: path.tenant, id: path.profileId }, leaseId: path.leaseId };
  };

  // Streams never end by themselves: the server's close would wait for them.
  app.addHook('preClose', async () => leases.person.endStreams());
  registerOperation(app, OPERATIONS.watchLive, async (request, reply) => {
    const { profile, leaseId } = lease(request.params);
    const stream = new EventStreamWriter(reply.raw);
    // Refusals (no such lease, expired) are answered as JSON, before the stream begins.
    const stop = await leases.person.watch(profile, leaseId, stream);
    reply.hijack();
    const gone = () => {
      stop();
      stream.end();
    };
    if (reply.raw.destroyed) return gone();
    reply.raw.once('close', gone);
    stream.begin();
  });

  registerOperation(app, OPERATIONS.startPersonControl, async (request) => {
    const { profile, leaseId } = lease(request.params);
    return leases.person.start(
      profile,
      leaseId,
      parse(OPERATIONS.startPersonControl.body, request.body, 'body'),
    );
  });
  registerOperation(app, OPERATIONS.endPersonControl, async (request) => {
    const { profile, leaseId } = lease(request.params);
    const body = parse(OPERATIONS.endPersonControl.body, request.body, 'body');
    return leases.person.end(profile, leaseId, body.holder);
  });
  registerOperation(app, OPERATIONS.personInput, async (request) => {
    const { profile, leaseId } = lease(request.params);
    return leases.person.input(profile, leaseId, parse(OPERATIONS.personInput.body, request.body, 'body'));
  });
}
