import createClient, { type Client } from 'openapi-fetch';
import type { components, paths } from './api.js';

/**
 * Issue 16: Leasehold's typed REST client. The types are generated from the API's OpenAPI document
 * (`npm run openapi` writes `api.d.ts`); the calls are openapi-fetch's, so each path, its
 * parameters, its body and every answer it documents are checked by the compiler:
 *
 *   const leasehold = createLeaseholdClient({ baseUrl: 'http://127.0.0.1:3000', apiKey });
 *   const { data, error } = await leasehold.GET('/v1/runs/{id}', { params: { path: { id } } });
 *
 * `data` is the success body, `error` the `{error: {code, message}}` of a failure, `response` the
 * Response itself (its status tells 200 from 201).
 */
export interface LeaseholdClientOptions {
  /** The API's root, e.g. `http://127.0.0.1:3000` (the paths carry their `/v1`). */
  baseUrl: string;
  /** An API key (`lhk_…`), sent as `Authorization: Bearer <key>`. */
  apiKey: string;
  /** Another fetch (a test's, a proxy's); the global one when left out. */
  fetch?: (request: Request) => Promise<Response>;
}

export type LeaseholdClient = Client<paths>;

export function createLeaseholdClient(options: LeaseholdClientOptions): LeaseholdClient {
  return createClient<paths>({
    // A trailing slash or `/v1` would double up with the paths' own.
    baseUrl: options.baseUrl.replace(/\/+$/, '').replace(/\/v1$/, ''),
    headers: { authorization: `Bearer ${options.apiKey}` },
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
}

export type { components, operations, paths } from './api.js';

type Schemas = components['schemas'];
/** The API's answers, by name (the document's `components.schemas`). */
export type Run = Schemas['Run'];
export type RunDetail = Schemas['RunDetail'];
export type RunPage = Schemas['RunPage'];
export type RunStep = Schemas['RunStep'];
export type StepPage = Schemas['StepPage'];
export type Approval = Schemas['Approval'];
export type PersonControl = Schemas['PersonControl'];
export type Session = Schemas['Session'];
export type Agent = Schemas['Agent'];
export type AgentVersion = Schemas['AgentVersion'];
export type Profile = Schemas['Profile'];
export type CreatedProfile = Schemas['CreatedProfile'];
export type ApiKey = Schemas['ApiKey'];
export type CreatedApiKey = Schemas['CreatedApiKey'];
export type Webhook = Schemas['Webhook'];
export type CreatedWebhook = Schemas['CreatedWebhook'];
export type ModelList = Schemas['ModelList'];
export type ErrorBody = Schemas['Error'];
export type Schedule = Schemas['Schedule'];
export type RunFile = Schemas['RunFile'];
export type UploadedFile = Schemas['UploadedFile'];
/** What the requests send, by name. */
export type SubmitRun = Schemas['SubmitRunInput'];
export type CreateSession = Schemas['CreateSessionInput'];
export type CreateProfile = Schemas['CreateProfileInput'];
export type ChangeProfile = Schemas['ChangeProfileInput'];
export type ChangeAgent = Schemas['ChangeAgentInput'];
export type AgentDefinition = Schemas['AgentDefinitionInput'];
export type CreateApiKey = Schemas['CreateApiKeyInput'];
export type CreateWebhook = Schemas['CreateWebhookInput'];
export type ApproveApproval = Schemas['ApproveApprovalInput'];
export type DenyApproval = Schemas['DenyApprovalInput'];
export type CreateSchedule = Schemas['CreateScheduleInput'];
export type PatchSchedule = Schemas['PatchScheduleInput'];
