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
  FRESH_PRIORITY,
  RESUMED_PRIORITY,
  RUNS_QUEUE,
  type RunJob,
  type RunJobResult,
  type RunsQueue,
  runJobId,
  runJobName,
  runJobOptions,
  runJobPending,
  runJobSchema,
} from './runs.js';
export {
  closeWorker,
  createQueueWorker,
  handBack,
  handBackLater,
  type QueueWorkerOptions,
  SHUTDOWN_REASON,
} from './worker.js';
