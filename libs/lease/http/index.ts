export { setDataPlaneErrorAnswers } from './error-answers.js';
export { answerIdempotently, type IdempotentAnswer } from './idempotency.js';
export { dataPlaneOpenApiDocument } from './openapi.js';
export { DATA_PLANE_OPERATIONS, type DataPlaneOperation } from './route-table.js';
export { registerDataPlaneRoutes } from './routes.js';
export { createDataPlaneServer, DATA_PLANE_BODY_LIMIT_BYTES, type DataPlaneServerOptions } from './server.js';
export { presentsToken, tokenMatches } from './token.js';
export {
  registerWorker,
  type WorkerAdvert,
  type WorkerRegistration,
  type WorkerRegistrationOptions,
  type WorkerRegistryPort,
} from './worker-registration.js';
export { requireWorkerSecrets, type WorkerSecrets } from './worker-secrets.js';
