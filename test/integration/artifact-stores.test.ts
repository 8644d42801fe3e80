import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ArtifactStore,
  LocalArtifactStore,
  openArtifactStore,
  S3ArtifactStore,
} from '../../libs/artifacts/index.js';
import type { ArtifactName } from '../../libs/contracts/index.js';
import { startS3Server, type TestS3Server } from '../fixtures/s3-server.js';

// Both stores behind one interface, held to the same behaviour: the local folder every role on one
// disk shares, and the S3-compatible bucket (s3rver, a real S3 wire server, in a child process).
let s3: TestS3Server;
let localDir: string;

beforeAll(async () => {
  s3 = await startS3Server();
  localDir = await mkdtemp(join(tmpdir(), 'leasehold-artifacts-'));
});
afterAll(async () => {
  await s3?.close();
  if (localDir) await rm(localDir, { recursive: true, force: true });
});

let prefixCount = 0;
function s3Store(prefix = `p${++prefixCount}/`): S3ArtifactStore {
  return new S3ArtifactStore(
    { bucket: s3.bucket, endpoint: s3.endpoint, region: s3.region, prefix },
    { credentials: s3.credentials },
  );
}

const jpeg = (fill: number) => new Uint8Array([0xff, 0xd8, fill, fill, 0xff, 0xd9]);
const name = (n: string) => n as ArtifactName;

async function collect(store: ArtifactStore): Promise<string[]> {
  const runs: string[] = [];
  for await (const { tenant, runId } of store.listRuns()) runs.push(`${tenant}/${runId}`);
  return runs.sort();
}

describe.each([
  ['a local folder', async () => new LocalArtifactStore(await mkdtemp(join(localDir, 'store-'))).open()],
  ['an S3-compatible bucket', async () => s3Store().open()],
])('the artifact store in %s', (_kind, makeStore: () => Promise<ArtifactStore>) => {
  it('answers the bytes and the content type an artifact was written with', async () => {
    const store = await makeStore();
    await store.put({ tenant: 'acme', runId: 'run_aaaa1', name: name('s1.jpg') }, jpeg(1), 'image/jpeg');
    await store.put({ tenant: 'acme', runId: 'run_aaaa1', name: name('o1.png') }, jpeg(2), 'image/png');
    const got = await store.get({ tenant: 'acme', runId: 'run_aaaa1', name: name('s1.jpg') });
    expect(got?.contentType).toBe('image/jpeg');
    expect([...(got?.bytes ?? [])]).toEqual([...jpeg(1)]);
    expect((await store.get({ tenant: 'acme', runId: 'run_aaaa1', name: name('o1.png') }))?.contentType).toBe(
      'image/png',
    );
  });

  it('answers undefined for an artifact never written, another run’s, and a name that is a path', async () => {
    const store = await makeStore();
    await store.put({ tenant: 'acme', runId: 'run_bbbb1', name: name('s1.jpg') }, jpeg(1), 'image/jpeg');
    expect(await store.get({ tenant: 'acme', runId: 'run_bbbb1', name: name('s2.jpg') })).toBeUndefined();
    expect(await store.get({ tenant: 'other', runId: 'run_bbbb1', name: name('s1.jpg') })).toBeUndefined();
    expect(await store.get({ tenant: 'acme', runId: 'run_bbbb2', name: name('s1.jpg') })).toBeUndefined();
    expect(
      await store.get({ tenant: 'acme', runId: 'run_bbbb1', name: name('../run_bbbb1/s1.jpg') }),
    ).toBeUndefined();
    expect(await store.get({ tenant: 'acme', runId: '..', name: name('s1.jpg') })).toBeUndefined();
    await expect(
      store.put({ tenant: 'acme', runId: 'run_bbbb1', name: name('x/../../s1.jpg') }, jpeg(1), 'image/jpeg'),
    ).rejects.toThrow();
  });

  it('deletes every artifact of one run and leaves the other runs alone', async () => {
    const store = await makeStore();
    for (const n of ['s1.jpg', 's2.jpg', 'o1.png']) {
      await store.put({ tenant: 'acme', runId: 'run_cccc1', name: name(n) }, jpeg(1), 'image/jpeg');
    }
    await store.put({ tenant: 'acme', runId: 'run_cccc2', name: name('s1.jpg') }, jpeg(2), 'image/jpeg');
    await store.deleteRun('acme', 'run_cccc1');
    await store.deleteRun('acme', 'run_never');
    expect(await store.get({ tenant: 'acme', runId: 'run_cccc1', name: name('s1.jpg') })).toBeUndefined();
    expect(await store.get({ tenant: 'acme', runId: 'run_cccc1', name: name('o1.png') })).toBeUndefined();
    expect(await store.get({ tenant: 'acme', runId: 'run_cccc2', name: name('s1.jpg') })).toBeDefined();
    expect(await collect(store)).toEqual(['acme/run_cccc2']);
  });

  it('lists each run with artifacts once, across tenants whose names sort around one another', async () => {
    const store = await makeStore();
    // `t-x` sorts before `t/` by bytes but after `t` as a folder, `t0` and `t_a` after both: however
    // the store orders them, no tenant may hide or repeat its neighbours.
    const refs = [
      ['t', 'run_r1'],
      ['t', 'run_r2'],
      ['t-x', 'run_r3'],
      ['t0', 'run_r4'],
      ['t_a', 'run_r5'],
      ['u', 'run_r6'],
    ] as const;
    for (const [tenant, runId] of refs) {
      for (const n of ['s1.jpg', 's2.jpg'])
        await store.put({ tenant, runId, name: name(n) }, jpeg(3), 'image/jpeg');
    }
    expect(await collect(store)).toEqual(refs.map(([t, r]) => `${t}/${r}`).sort());
  });
});

describe('the artifact store in an S3-compatible bucket', () => {
  it('keys each artifact `<prefix><tenant>/<run id>/<name>`', async () => {
    const store = s3Store('leasehold/keys/');
    await store.put({ tenant: 'acme', runId: 'run_dddd1', name: name('s1.jpg') }, jpeg(1), 'image/jpeg');
    const client = new S3Client({
      endpoint: s3.endpoint,
      region: s3.region,
      forcePathStyle: true,
      credentials: s3.credentials,
    });
    const listed = await client.send(
      new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: 'leasehold/keys/' }),
    );
    expect(listed.Contents?.map((o) => o.Key)).toEqual(['leasehold/keys/acme/run_dddd1/s1.jpg']);
    client.destroy();
  });

  it('stops at open when the bucket is missing or refuses the credentials', async () => {
    await expect(
      new S3ArtifactStore(
        { bucket: 'no-such-bucket', endpoint: s3.endpoint, region: s3.region, prefix: '' },
        { credentials: s3.credentials },
      ).open(),
    ).rejects.toThrow();
    await expect(
      new S3ArtifactStore(
        { bucket: s3.bucket, endpoint: s3.endpoint, region: s3.region, prefix: '' },
        { credentials: { accessKeyId: 'NOT-A-KEY', secretAccessKey: 'S3RVER' } },
      ).open(),
    ).rejects.toThrow();
  });

  it('lists and deletes a run holding more artifacts than one listing page', async () => {
    const store = s3Store();
    const many = Array.from({ length: 1005 }, (_, i) => `s${i}.jpg`);
    for (let i = 0; i < many.length; i += 50) {
      await Promise.all(
        many
          .slice(i, i + 50)
          .map((n) =>
            store.put({ tenant: 'acme', runId: 'run_eeee1', name: name(n) }, jpeg(1), 'image/jpeg'),
          ),
      );
    }
    await store.put({ tenant: 'acme', runId: 'run_eeee2', name: name('s1.jpg') }, jpeg(1), 'image/jpeg');
    expect(await collect(store)).toEqual(['acme/run_eeee1', 'acme/run_eeee2']);
    await store.deleteRun('acme', 'run_eeee1');
    expect(await collect(store)).toEqual(['acme/run_eeee2']);
  }, 60_000);
});

describe('openArtifactStore', () => {
  it('opens the bucket when config names one, else makes and opens the local folder', async () => {
    const dir = join(localDir, 'made', 'on', 'start');
    const local = await openArtifactStore({ artifacts: { dir, s3: undefined } });
    expect(local).toBeInstanceOf(LocalArtifactStore);
    await local.put({ tenant: 'acme', runId: 'run_ffff1', name: name('s1.jpg') }, jpeg(1), 'image/jpeg');
    expect(await collect(local)).toEqual(['acme/run_ffff1']);

    // The SDK's own chain supplies the credentials a role runs with.
    process.env.AWS_ACCESS_KEY_ID = s3.credentials.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = s3.credentials.secretAccessKey;
    const bucket = await openArtifactStore({
      artifacts: {
        dir,
        s3: { bucket: s3.bucket, endpoint: s3.endpoint, region: s3.region, prefix: 'opened/' },
      },
    });
    expect(bucket).toBeInstanceOf(S3ArtifactStore);
    await expect(
      openArtifactStore({
        artifacts: {
          dir,
          s3: { bucket: 'missing-one', endpoint: s3.endpoint, region: s3.region, prefix: '' },
        },
      }),
    ).rejects.toThrow();
  });
});
