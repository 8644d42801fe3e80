export {
  type ConnectionRole,
  closeRedis,
  connectRedis,
  DEFAULT_REDIS_URL,
  redactUrl,
  redisAnswers,
  redisOptions,
} from './connection.js';
export {
  createRunsQueue,
  enqueueExecution,
  enqueueRun,
  RUNS_QUEUE,
  type RunJob,
  type RunsQueue,
  runJobId,
  runJobOptions,
  runJobSchema,
} from './runs.js';
export {
  closeWorker,
  createQueueWorker,
  handBack,
  type QueueWorkerOptions,
  SHUTDOWN_REASON,
} from './worker.js';
