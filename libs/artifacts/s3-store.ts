import {
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListObjectsV2Command,
  NoSuchKey,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { storedArtifactNameSchema, tenantIdSchema } from '../contracts/index.js';
import { type ArtifactRef, type ArtifactStore, artifactRunIdValid } from './artifact-store.js';

/** The bucket's settings, as config.artifacts.s3 gives them. */
export interface S3ArtifactStoreOptions {
  readonly bucket: string;
  /** An S3-compatible endpoint (MinIO, R2…); undefined: AWS itself. */
  readonly endpoint: string | undefined;
  readonly region: string;
  /** Put before every key; `leasehold/` by default. */
  readonly prefix: string;
}

/**
 * The artifact store in an S3-compatible bucket, for a fleet on several machines: every role reaches
 * the same bucket. Keys are `<prefix><tenant>/<run id>/<name>`, each part checked against its schema
 * as in the local folder, so no name reaches another run's keys. Credentials come from the AWS SDK's
 * own chain (AWS_ACCESS_KEY_ID…, a profile, an instance role); `client` overrides any of it (tests).
 */
export class S3ArtifactStore implements ArtifactStore {
  readonly #client: S3Client;
  readonly #bucket: string;
  readonly #prefix: string;

  constructor(options: S3ArtifactStoreOptions, client: Partial<S3ClientConfig> = {}) {
    this.#bucket = options.bucket;
    this.#prefix = options.prefix;
    const compatible = options.endpoint !== undefined;
    this.#client = new S3Client({
      region: options.region,
      ...(compatible
        ? {
            endpoint: options.endpoint,
            // Servers other than AWS are mostly reached by path (`<endpoint>/<bucket>/<key>`): a
            // virtual host per bucket needs DNS nobody set up for MinIO on localhost.
            forcePathStyle: true,
            // The SDK's default checksums on every request are refused by several S3-compatible
            // servers; ask for them only where S3 itself requires one (DeleteObjects).
            requestChecksumCalculation: 'WHEN_REQUIRED',
            responseChecksumValidation: 'WHEN_REQUIRED',
          }
        : {}),
      ...client,
    });
  }

  /**
   * Checks the bucket answers (start-up: a bucket that is missing or refuses these credentials
   * stops the process, as an unmakeable folder does, instead of failing each screenshot later).
   */
  async open(): Promise<this> {
    await this.#client.send(new HeadBucketCommand({ Bucket: this.#bucket }));
    return this;
  }

  async put(ref: ArtifactRef, bytes: Uint8Array, contentType: string): Promise<void> {
    await this.#client.send(
      new PutObjectCommand({
        Bucket: this.#bucket,
        Key: this.#key(ref.tenant, ref.runId, storedArtifactNameSchema.parse(ref.name)),
        Body: bytes,
        ContentType: contentType,
      }),
    );
  }

  async get(ref: ArtifactRef): Promise<{ bytes: Uint8Array; contentType: string } | undefined> {
    const name = storedArtifactNameSchema.safeParse(ref.name);
    if (!name.success || !valid(ref.tenant, ref.runId)) return undefined;
    try {
      const answer = await this.#client.send(
        new GetObjectCommand({ Bucket: this.#bucket, Key: this.#key(ref.tenant, ref.runId, name.data) }),
      );
      if (answer.Body === undefined) return undefined;
      return {
        bytes: await answer.Body.transformToByteArray(),
        contentType: answer.ContentType ?? 'application/octet-stream',
      };
    } catch (error) {
      if (error instanceof NoSuchKey) return undefined;
      throw error;
    }
  }

  /**
   * Lists the run's keys and deletes them a page (at most 1000, DeleteObjects' own cap) at a time,
   * always from the first page again: what was deleted is gone from the next listing, so no
   * continuation token has to outlive the keys it points past.
   */
  async deleteRun(tenant: string, runId: string): Promise<void> {
    if (!valid(tenant, runId)) return;
    const runPrefix = this.#key(tenant, runId, '');
    for (;;) {
      const page = await this.#client.send(
        new ListObjectsV2Command({ Bucket: this.#bucket, Prefix: runPrefix, MaxKeys: 1000 }),
      );
      const keys = (page.Contents ?? []).flatMap((o) => (o.Key === undefined ? [] : [{ Key: o.Key }]));
      if (keys.length === 0) return;
      const answer = await this.#client.send(
        new DeleteObjectsCommand({ Bucket: this.#bucket, Delete: { Objects: keys, Quiet: true } }),
      );
      // A key the bucket refused to delete would come back on the next listing forever.
      const refused = answer.Errors ?? [];
      if (refused.length > 0) {
        throw new Error(
          `the bucket refused to delete ${refused.length} artifact(s) of ${tenant}/${runId}: ${refused[0]?.Code ?? 'no code'}`,
        );
      }
    }
  }

  /**
   * Each run with artifacts, once: one listing of every key under the prefix, 1000 a request. A
   * listing split at `/` (tenants, then each tenant's runs) would take fewer requests, but it leans
   * on the server reporting common prefixes two levels deep and ordering keys by their bytes, and
   * not every S3-compatible server does either (s3rver does neither). The retention sweep that calls
   * this runs seldom; being right on every bucket is worth the requests.
   */
  async *listRuns(): AsyncIterable<{ tenant: string; runId: string }> {
    const seen = new Set<string>();
    let token: string | undefined;
    do {
      const page = await this.#client.send(
        new ListObjectsV2Command({
          Bucket: this.#bucket,
          Prefix: this.#prefix,
          ...(token === undefined ? {} : { ContinuationToken: token }),
        }),
      );
      for (const object of page.Contents ?? []) {
        const [tenant = '', runId = '', name, ...rest] = (object.Key ?? '')
          .slice(this.#prefix.length)
          .split('/');
        if (name === undefined || rest.length > 0 || !valid(tenant, runId)) continue;
        const run = `${tenant}/${runId}`;
        if (seen.has(run)) continue;
        seen.add(run);
        yield { tenant, runId };
      }
      token = page.IsTruncated === true ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
  }

  /** Closes the client's sockets (idempotent). */
  close(): void {
    this.#client.destroy();
  }

  #key(tenant: string, runId: string, name: string): string {
    if (!valid(tenant, runId)) throw new RangeError(`no artifact key for ${tenant}/${runId}`);
    return `${this.#prefix}${tenant}/${runId}/${name}`;
  }
}

function valid(tenant: string, runId: string): boolean {
  return tenantIdSchema.safeParse(tenant).success && artifactRunIdValid(runId);
}
