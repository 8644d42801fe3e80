export { checkWebhookUrl, WebhookAddressRefused, webhookGuard } from './address-guard.js';
export { type DeliveryFailure, type WebhookDeliveryDeps, webhookDeliveryProcessor } from './delivery.js';
export {
  signWebhook,
  standardWebhookHeaders,
  standardWebhookKey,
  verifyWebhookSignature,
} from './signature.js';
export { WebhookTeller, type WebhookTellerDeps } from './teller.js';
export { startWebhookWorker, type WebhookWorkerOptions } from './worker.js';
