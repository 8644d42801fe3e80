import {
  type AgentVersion,
  type ApiKey,
  type Approval,
  type ApproveApproval,
  type ChangeAgent,
  type ChangeProfile,
  type CreateApiKey,
  type CreatedApiKey,
  type CreatedProfile,
  type CreateProfile,
  type CreateSchedule,
  createLeaseholdClient,
  type PatchSchedule,
  type PersonControl,
  type Profile,
  type paths,
  type Run,
  type RunDetail,
  type RunFile,
  type RunPage,
  type Schedule,
  type Session,
  type SubmitRun,
  type UploadedFile,
} from '../../clients/typescript/index.js';
import { ApiAnswerError, ConnectionError } from './errors.js';

/** Where the API is and the key that speaks to it (from flags or the environment). */
export interface ApiTarget {
  /** The API's root, with or without its `/v1` (`http://127.0.0.1:3000` as the banner prints it). */
  apiUrl: string;
  apiKey: string;
}

export type {
  AgentVersion,
  ApiKey,
  Approval,
  PatchSchedule,
  PersonControl,
  Profile,
  Run,
  RunDetail,
  RunFile,
  RunPage,
  Schedule,
  UploadedFile,
};
export type Grant = NonNullable<ApproveApproval['grant']>;

/**
 * What the CLI sends as its flags gave it: enums and JSON as typed, for the API to check and
 * answer in its own words (a bad status or scope is the API's `bad_request`, not a guess of ours).
 */
export type RunQuery = { [K in keyof RunListQuery]?: string };
type RunListQuery = NonNullable<paths['/v1/runs']['get']['parameters']['query']>;
export interface SubmitRunBody {
  input: string;
  script?: unknown;
  timeout_ms?: number;
  files?: string[];
  output_schema?: unknown;
}
export interface CreateProfileBody {
  id: string;
  allowed_origins: string[];
  frame_origins?: string[];
  subresources?: string;
  protected?: boolean;
}

/** What openapi-fetch answers: the parsed body on success, the parsed error body otherwise. */
interface FetchAnswer {
  data?: unknown;
  error?: unknown;
  response: Response;
}

/** The API root without a trailing `/` or `/v1`: the typed client's paths start with `/v1`. */
export function apiRoot(apiUrl: string): string {
  return apiUrl.replace(/\/+$/, '').replace(/\/v1$/, '');
}

/** The API's error body as a {@link ApiAnswerError}; an answer of another shape by its HTTP status. */
function answerError(response: Response, body: unknown): ApiAnswerError {
  const error = (body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  if (typeof error?.code === 'string')
    return new ApiAnswerError(error.code, String(error.message ?? ''), response.status);
  const text = typeof body === 'string' ? body.slice(0, 200) : response.statusText;
  return new ApiAnswerError(`http_${response.status}`, text, response.status);
}

/**
 * The REST calls the CLI makes, through the typed client (`createLeaseholdClient`). Every failure
 * is a {@link ApiAnswerError} carrying the API's own code, or a {@link ConnectionError}.
 */
export class LeaseholdApi {
  readonly root: string;
  readonly #client: ReturnType<typeof createLeaseholdClient>;

  constructor(readonly target: ApiTarget) {
    this.root = apiRoot(target.apiUrl);
    this.#client = createLeaseholdClient({ baseUrl: this.root, apiKey: target.apiKey });
  }

  /**
   * One call; its answer typed as the document's schema names it (`Run`, `Approval`…): openapi-fetch
   * drops a schema's free-form fields (`input`, `result`) from its inferred `data`.
   */
  async #call<Data>(request: () => Promise<FetchAnswer>): Promise<Data> {
    let answer: FetchAnswer;
    try {
      answer = await request();
    } catch (error) {
      throw new ConnectionError(this.root, error);
    }
    if (!answer.response.ok) throw answerError(answer.response, answer.error);
    return answer.data as Data;
  }

  createSession(body: { browser_profile_id: string }): Promise<Session> {
    return this.#call(() => this.#client.POST('/v1/sessions', { body }));
  }

  submitRun(sessionId: string, body: SubmitRunBody, idempotencyKey?: string): Promise<Run> {
    return this.#call(() =>
      this.#client.POST('/v1/sessions/{id}/runs', {
        params: {
          path: { id: sessionId },
          ...(idempotencyKey ? { header: { 'idempotency-key': idempotencyKey } } : {}),
        },
        // The API applies its defaults (timeout_ms) and checks the script against its schema.
        body: body as SubmitRun,
      }),
    );
  }

  getRun(id: string): Promise<RunDetail> {
    return this.#call(() => this.#client.GET('/v1/runs/{id}', { params: { path: { id } } }));
  }

  listRuns(query: RunQuery): Promise<RunPage> {
    return this.#call(() => this.#client.GET('/v1/runs', { params: { query: query as RunListQuery } }));
  }

  cancelRun(id: string): Promise<Run> {
    return this.#call(() => this.#client.POST('/v1/runs/{id}/cancel', { params: { path: { id } } }));
  }

  /** The run's principal takes its page over (`held`, or `pausing` until a running run's next step). */
  takeOverRun(id: string): Promise<PersonControl> {
    return this.#call(() => this.#client.POST('/v1/runs/{id}/takeover', { params: { path: { id } } }));
  }

  /** The person holding the run's page hands it back; the run goes on. */
  handBackRun(id: string): Promise<PersonControl> {
    return this.#call(() => this.#client.POST('/v1/runs/{id}/handback', { params: { path: { id } } }));
  }

  retryRun(id: string): Promise<Run> {
    return this.#call(() => this.#client.POST('/v1/runs/{id}/retry', { params: { path: { id } } }));
  }

  listApprovals(runId?: string): Promise<{ approvals: Approval[] }> {
    return this.#call(() =>
      this.#client.GET('/v1/approvals', { params: { query: runId ? { run_id: runId } : {} } }),
    );
  }

  approve(id: string, grant?: Grant): Promise<Approval> {
    return this.#call(() =>
      this.#client.POST('/v1/approvals/{id}/approve', {
        params: { path: { id } },
        body: grant ? { grant } : {},
      }),
    );
  }

  deny(id: string, reason: string): Promise<Approval> {
    return this.#call(() =>
      this.#client.POST('/v1/approvals/{id}/deny', { params: { path: { id } }, body: { reason } }),
    );
  }

  createProfile(body: CreateProfileBody): Promise<CreatedProfile> {
    return this.#call(() => this.#client.POST('/v1/profiles', { body: body as CreateProfile }));
  }

  changeProfile(id: string, body: ChangeProfile): Promise<Profile> {
    return this.#call(() => this.#client.PATCH('/v1/profiles/{id}', { params: { path: { id } }, body }));
  }

  async deleteProfile(id: string): Promise<void> {
    await this.#call(() => this.#client.DELETE('/v1/profiles/{id}', { params: { path: { id } } }));
  }

  async deleteSession(id: string): Promise<void> {
    await this.#call(() => this.#client.DELETE('/v1/sessions/{id}', { params: { path: { id } } }));
  }

  changeAgent(id: string, body: ChangeAgent): Promise<AgentVersion> {
    return this.#call(() => this.#client.PATCH('/v1/agents/{id}', { params: { path: { id } }, body }));
  }

  listProfiles(): Promise<{ profiles: Profile[] }> {
    return this.#call(() => this.#client.GET('/v1/profiles'));
  }

  createKey(body: { principal: string; scopes: string[] }): Promise<CreatedApiKey> {
    return this.#call(() => this.#client.POST('/v1/api-keys', { body: body as CreateApiKey }));
  }

  listKeys(): Promise<{ api_keys: ApiKey[] }> {
    return this.#call(() => this.#client.GET('/v1/api-keys'));
  }

  async revokeKey(id: string): Promise<void> {
    await this.#call(() => this.#client.DELETE('/v1/api-keys/{id}', { params: { path: { id } } }));
  }

  createSchedule(body: CreateSchedule): Promise<Schedule> {
    return this.#call(() => this.#client.POST('/v1/schedules', { body }));
  }

  listSchedules(): Promise<{ schedules: Schedule[] }> {
    return this.#call(() => this.#client.GET('/v1/schedules'));
  }

  getSchedule(id: string): Promise<Schedule> {
    return this.#call(() => this.#client.GET('/v1/schedules/{id}', { params: { path: { id } } }));
  }

  updateSchedule(id: string, body: PatchSchedule): Promise<Schedule> {
    return this.#call(() => this.#client.PATCH('/v1/schedules/{id}', { params: { path: { id } }, body }));
  }

  /** `pause` or `resume`. */
  switchSchedule(id: string, to: 'pause' | 'resume'): Promise<Schedule> {
    const path = to === 'pause' ? '/v1/schedules/{id}/pause' : '/v1/schedules/{id}/resume';
    return this.#call(() => this.#client.POST(path, { params: { path: { id } } }));
  }

  async deleteSchedule(id: string): Promise<void> {
    await this.#call(() => this.#client.DELETE('/v1/schedules/{id}', { params: { path: { id } } }));
  }

  scheduleRuns(id: string): Promise<{ runs: Run[] }> {
    return this.#call(() => this.#client.GET('/v1/schedules/{id}/runs', { params: { path: { id } } }));
  }

  /** Uploads one file as the form's part `file`; its record (id, name, type, size, SHA-256). */
  uploadFile(file: {
    name: string;
    contentType: string;
    bytes: Uint8Array<ArrayBuffer>;
  }): Promise<UploadedFile> {
    const form = new FormData();
    form.append('file', new Blob([file.bytes], { type: file.contentType }), file.name);
    return this.#call(() =>
      this.#client.POST('/v1/files', {
        body: form as never,
        // The form goes as it is: fetch writes its multipart boundary.
        bodySerializer: (sent) => sent as unknown as FormData,
      }),
    );
  }

  getFile(id: string): Promise<UploadedFile> {
    return this.#call(() => this.#client.GET('/v1/files/{id}', { params: { path: { id } } }));
  }

  listRunFiles(id: string): Promise<{ files: RunFile[] }> {
    return this.#call(() => this.#client.GET('/v1/runs/{id}/files', { params: { path: { id } } }));
  }

  /** A file the run downloaded: its bytes. */
  async runFileBytes(id: string, file: string): Promise<Uint8Array> {
    const bytes = await this.#call<ArrayBuffer>(() =>
      this.#client.GET('/v1/runs/{id}/files/{file}', {
        params: { path: { id, file } },
        parseAs: 'arrayBuffer',
      }),
    );
    return new Uint8Array(bytes);
  }

  /**
   * Opens the run's event stream (Server-Sent Events, not a JSON route: plain fetch), from after
   * `lastEventId` when given. An answer other than 200 is the API's error.
   */
  async openEvents(id: string, lastEventId: string | undefined): Promise<Response> {
    let response: Response;
    try {
      response = await fetch(`${this.root}/v1/runs/${encodeURIComponent(id)}/events`, {
        headers: {
          authorization: `Bearer ${this.target.apiKey}`,
          accept: 'text/event-stream',
          ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
        },
      });
    } catch (error) {
      throw new ConnectionError(this.root, error);
    }
    if (!response.ok) {
      const text = await response.text();
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // Not JSON: the status and the text say what happened.
      }
      throw answerError(response, body);
    }
    return response;
  }
}
