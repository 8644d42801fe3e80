import type { FastifyError, FastifyInstance } from 'fastify';
import { BrowserToolError, CaptureTimedOutError } from '../../browser/index.js';
import { DATA_PLANE_ERROR_STATUS, type DataPlaneErrorCode } from '../../contracts/index.js';
import { errorBody, sendFrameworkError } from '../../telemetry/index.js';
import { DataPlaneError } from '../index.js';

/**
 * How the data plane answers a failure: its own refusals and the page engine's with their stable
 * code and status (DESIGN §8), a body that is not JSON as `validation_failed`, and size, content
 * type and anything unexpected in the one shape both servers share.
 */
export function setDataPlaneErrorAnswers(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | Error, request, reply) => {
    if (error instanceof DataPlaneError) {
      const body = errorBody(error.code, error.message, error.details);
      if (error.page === undefined) return reply.code(error.status).send(body);
      // A navigation that never reached a server: the lease and the error page it now shows.
      return reply.code(error.status).send({
        ...body,
        lease: error.page.lease,
        observation: error.page.observation,
        evidence_key: error.page.evidenceKey,
      });
    }
    if (error instanceof BrowserToolError) {
      const code = error.code as DataPlaneErrorCode;
      // ADR-0159: a capture cut off by the deadline stays `page_changed`, marked so the caller says why.
      const facts = error instanceof CaptureTimedOutError ? { capture_timed_out: true } : {};
      return reply.code(DATA_PLANE_ERROR_STATUS[code] ?? 500).send(errorBody(code, error.message, facts));
    }
    const fastifyError = error as FastifyError;
    if (
      fastifyError.code === 'FST_ERR_CTP_INVALID_JSON_BODY' ||
      fastifyError.code === 'FST_ERR_CTP_EMPTY_JSON_BODY'
    )
      return reply
        .code(422)
        .send(errorBody('validation_failed', 'body: expected a JSON object', { field: 'body' }));
    return sendFrameworkError(error, request, reply, app.initialConfig.bodyLimit ?? 65_536);
  });
}
