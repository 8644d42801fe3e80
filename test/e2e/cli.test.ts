import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { eventually } from '../fixtures/eventually.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { uniquePrefix } from '../fixtures/redis.js';

const BIN = fileURLToPath(new URL('../../bin/leasehold.mjs', import.meta.url));

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Each line of `--json` output parsed: one document, or one object a line for `runs watch`. */
function jsonLines(stdout: string): unknown[] {
  return stdout
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line));
}

/**
 * The `leasehold` command line, run as the real bin in child processes against a live
 * fleet and a local shop page whose server counts every purchase, so a click the CLI let through
 * without approval, or twice, would show.
 */
describe('the leasehold command line against a live fleet', { timeout: 120_000 }, () => {
  let fleet: FleetHandle;
  let site: Server;
  let origin: string;
  let folder: string;
  let purchases = 0;
  /** What the claims page posted: the bytes of the file a run attached. */
  const received: Buffer[] = [];
  const EXPORT = 'id,total\n1,12.50\n2,7.25\n';
  const children = new Set<ChildProcess>();

  beforeAll(async () => {
    site = createServer((request, response) => {
      if (request.method === 'POST' && request.url?.endsWith('/buy')) {
        purchases += 1;
        return void response.end('ok');
      }
      if (request.method === 'POST' && request.url === '/received') {
        const chunks: Buffer[] = [];
        request.on('data', (chunk: Buffer) => chunks.push(chunk));
        request.on('end', () => {
          received.push(Buffer.concat(chunks));
          response.end('ok');
        });
        return;
      }
      if (request.url === '/export.csv') {
        response.setHeader('content-type', 'text/csv');
        response.setHeader('content-disposition', 'attachment; filename="claims-export.csv"');
        return void response.end(EXPORT);
      }
      if (request.url === '/claims/') {
        response.setHeader('content-type', 'text/html');
        return void response.end(`<!doctype html><title>Claims</title><h1>Claims</h1>
          <label>Claims file <input type="file"></label>
          <button onclick="document.querySelector('input').files[0].arrayBuffer()
            .then((bytes) => fetch('/received', {method: 'POST', body: bytes}))
            .then(() => document.body.insertAdjacentHTML('beforeend', '<h2>Sent</h2>'))">Send</button>
          <a href="/export.csv">Export</a>`);
      }
      response.setHeader('content-type', 'text/html');
      response.end(`<!doctype html><title>Shop</title><h1>Basket</h1>
        <button onclick="fetch('buy', {method: 'POST'}).then(() => document.body.insertAdjacentHTML('beforeend', '<h2>Thank you</h2>'))">Buy</button>`);
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    folder = await mkdtemp(join(tmpdir(), 'leasehold-cli-'));
    fleet = await startTestFleet(uniquePrefix('cli'));
  });

  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await fleet?.close();
    await new Promise((resolve) => site?.close(resolve));
    if (folder) await rm(folder, { recursive: true, force: true });
  });

  /** Starts `leasehold <args>` with the fleet's URL and key in its environment. */
  function start(args: string[], env: Record<string, string> = {}, cwd?: string) {
    const child = spawn(process.execPath, [BIN, ...args], {
      ...(cwd ? { cwd } : {}),
      env: {
        ...process.env,
        LEASEHOLD_API_URL: fleet.urls.api,
        LEASEHOLD_API_KEY: fleet.apiKey,
        NO_COLOR: '1',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const done = new Promise<CliResult>((resolve) =>
      child.once('close', (code) => {
        children.delete(child);
        resolve({ code, stdout, stderr });
      }),
    );
    return { done, stdout: () => stdout };
  }
  const cli = (args: string[], env: Record<string, string> = {}) => start(args, env).done;

  /** `leasehold <args> --json`, expected to succeed: its one JSON document. */
  // biome-ignore lint/suspicious/noExplicitAny: API answers, asserted field by field.
  async function cliJson(args: string[], env: Record<string, string> = {}): Promise<any> {
    const result = await cli([...args, '--json'], env);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const lines = jsonLines(result.stdout);
    expect(lines).toHaveLength(1);
    return lines[0];
  }

  const buyScript = (path: string) => ({
    steps: [
      { tool: 'browser.navigate', url: `${origin}/${path}/` },
      {
        tool: 'browser.act',
        target: { role: 'button', name: 'Buy' },
        action: 'click',
        postcondition: { role: 'heading', name: 'Thank you', wait_ms: 2_000 },
      },
    ],
    answer: 'Bought.',
  });

  /** A profile of its own for a test, made through the CLI, allowing the shop's origin. */
  async function newProfile(id: string): Promise<string> {
    expect(await cliJson(['profiles', 'create', id, '--origin', origin])).toMatchObject({ id });
    return id;
  }

  /** Waits until the run is parked on an approval, through `runs get --json`; the approval's id. */
  async function parkedApproval(runId: string): Promise<string> {
    const run = await eventually(
      () => cliJson(['runs', 'get', runId]),
      (view) => view.status !== 'queued' && view.status !== 'running',
      30_000,
      200,
    );
    expect(run.status).toBe('parked');
    expect(run.pending_approvals).toHaveLength(1);
    return run.pending_approvals[0].id as string;
  }

  it('drives a run from submit through an approval to its end while runs watch prints its steps', async () => {
    const profile = await cliJson(['profiles', 'create', 'cli-shop', '--origin', origin]);
    expect(profile).toMatchObject({ id: 'cli-shop', allowed_origins: [origin] });
    const listed = await cliJson(['profiles', 'list']);
    expect(listed.profiles.map((entry: { id: string }) => entry.id)).toContain('cli-shop');
    expect((await cli(['profiles', 'list'])).stdout).toContain('cli-shop');

    const scriptFile = join(folder, 'buy.json');
    await writeFile(scriptFile, JSON.stringify(buyScript('watched')));
    const submitted = await cliJson([
      'runs',
      'submit',
      '--profile',
      'cli-shop',
      '--input',
      'Buy what is in the basket',
      '--script',
      `@${scriptFile}`,
      '--timeout',
      '120000',
    ]);
    expect(submitted).toMatchObject({ status: 'queued', browser_profile_id: 'cli-shop' });
    const runId = submitted.id as string;

    const watch = start(['runs', 'watch', runId]);
    const pending = await eventually(
      () => cliJson(['approvals', 'list', '--run', runId]),
      (answer) => answer.approvals.length > 0,
      30_000,
      200,
    );
    expect(pending.approvals).toHaveLength(1);
    const approvalId = pending.approvals[0].id as string;
    expect((await cli(['approvals', 'list'])).stdout).toContain(approvalId);
    expect(purchases).toBe(0);

    const approved = await cliJson([
      'approvals',
      'approve',
      approvalId,
      '--grant',
      '{"duration_ms":600000,"max_actions":5}',
    ]);
    expect(approved).toMatchObject({ id: approvalId, status: 'approved', grant_id: expect.any(String) });

    const watched = await watch.done;
    expect(watched.stderr).toBe('');
    expect(watched.code).toBe(0);
    expect(watched.stdout).toMatch(/browser\.navigate/);
    expect(watched.stdout).toMatch(/browser\.act/);
    expect(watched.stdout).toMatch(/approval .*requested/);
    expect(watched.stdout).toMatch(/tool calls \d+\/\d+/);
    expect(watched.stdout).toMatch(/succeeded/);
    // Each step printed once though the click parked and resumed; the end once, last.
    const printed = watched.stdout.trimEnd().split('\n');
    const stepLines = printed.filter((line) => /^step \S+ (browser|model)/.test(line));
    expect(stepLines.length).toBeGreaterThanOrEqual(3);
    expect(new Set(stepLines).size).toBe(stepLines.length);
    expect(printed.at(-1)).toMatch(new RegExp(`^run ${runId} succeeded`));
    expect(printed.filter((line) => /succeeded/.test(line))).toHaveLength(1);
    expect(purchases).toBe(1);

    const run = await cliJson(['runs', 'get', runId]);
    expect(run).toMatchObject({ id: runId, status: 'succeeded', result: { answer: 'Bought.' } });
    const succeeded = await cliJson(['runs', 'list', '--status', 'succeeded', '--profile', 'cli-shop']);
    expect(succeeded.runs.map((entry: { id: string }) => entry.id)).toContain(runId);
    expect((await cli(['runs', 'get', runId])).stdout).toMatch(/succeeded/);

    // The ended run's whole stream again, for machines: one event a line, the end among them.
    const replay = await cli(['runs', 'watch', runId, '--json']);
    expect(replay.code).toBe(0);
    const events = jsonLines(replay.stdout) as Array<{ type: string }>;
    expect(events.map((event) => event.type)).toEqual(
      expect.arrayContaining(['run.submitted', 'approval.requested', 'step.started', 'run.succeeded']),
    );
  });

  it('uploads a file a run attaches, and saves what the run downloaded byte for byte', async () => {
    await cliJson(['profiles', 'create', 'cli-claims', '--origin', origin]);
    const claims = Buffer.from('claim,amount\nA-1,12.50\n');
    const path = join(folder, 'claims.csv');
    await writeFile(path, claims);
    const uploaded = await cliJson(['files', 'upload', path]);
    expect(uploaded).toMatchObject({
      name: 'claims.csv',
      content_type: 'text/csv',
      size_bytes: claims.length,
    });
    expect((await cli(['files', 'get', uploaded.id])).stdout).toContain(
      `${uploaded.id}  claims.csv  text/csv`,
    );

    const script = {
      steps: [
        { tool: 'browser.navigate', url: `${origin}/claims/` },
        {
          tool: 'browser.act',
          target: { role: 'button', name: 'Claims file' },
          action: 'upload',
          file: uploaded.id,
        },
        {
          tool: 'browser.act',
          target: { role: 'button', name: 'Send' },
          action: 'click',
          postcondition: { role: 'heading', name: 'Sent', wait_ms: 2_000 },
        },
        { tool: 'browser.act', target: { role: 'link', name: 'Export' }, action: 'click' },
      ],
      answer: 'Sent and exported.',
    };
    const args = ['runs', 'submit', '--profile', 'cli-claims', '--input', 'Send the claims'];
    const submitted = await cliJson([...args, '--file', uploaded.id, '--script', JSON.stringify(script)]);
    const runId = submitted.id as string;
    const pending = await eventually(
      () => cliJson(['approvals', 'list', '--run', runId]),
      (answer) => answer.approvals.length > 0,
      30_000,
      200,
    );
    await cliJson([
      'approvals',
      'approve',
      pending.approvals[0].id,
      '--grant',
      '{"duration_ms":600000,"max_actions":5}',
    ]);
    expect((await cli(['runs', 'watch', runId])).code).toBe(0);
    expect(received).toEqual([claims]);

    const listed = await cliJson(['runs', 'files', runId]);
    expect(listed.files).toHaveLength(1);
    const [download] = listed.files;
    expect(download).toMatchObject({ name: 'claims-export.csv', state: 'stored' });
    expect((await cli(['runs', 'files', runId])).stdout).toContain(`sha256 ${download.sha256}`);
    // Saved under its own name in the folder it runs in; a second save does not replace it.
    const saved = await start(['runs', 'file', runId, download.id], {}, folder).done;
    expect(saved.code).toBe(0);
    expect(saved.stdout).toContain('claims-export.csv');
    expect(await readFile(join(folder, 'claims-export.csv'), 'utf8')).toBe(EXPORT);
    const again = await cli(['runs', 'file', runId, download.id, '--out', join(folder, 'again.csv')]);
    expect(again.code).toBe(0);
    expect(await readFile(join(folder, 'again.csv'), 'utf8')).toBe(EXPORT);
    const refused = await cli(['runs', 'file', runId, download.id, '--out', join(folder, 'again.csv')]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/again\.csv/);
    // A file no one uploaded is the API's 404, before any run is made.
    const unknown = await cli([
      ...args,
      '--file',
      'fil_nosuchfileatall0000',
      '--script',
      JSON.stringify(script),
    ]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^error not_found/);
  });

  it('submits a run with an output schema and prints the value its answer took', async () => {
    await cliJson(['profiles', 'create', 'cli-output', '--origin', origin]);
    const schema = {
      type: 'object',
      required: ['title', 'price'],
      properties: { title: { type: 'string' }, price: { type: 'number' } },
    };
    const script = { steps: [], answer: 'Read.', output: { title: 'Basket', price: 12.5 } };
    const submitted = await cliJson([
      'runs',
      'submit',
      '--profile',
      'cli-output',
      '--input',
      'Read the product',
      '--output-schema',
      JSON.stringify(schema),
      '--script',
      JSON.stringify(script),
    ]);
    expect((await cli(['runs', 'watch', submitted.id])).code).toBe(0);
    expect((await cliJson(['runs', 'get', submitted.id])).result.output).toEqual({
      title: 'Basket',
      price: 12.5,
    });
    const printed = (await cli(['runs', 'get', submitted.id])).stdout.split('\n');
    const outputLine = printed.find((line) => line.startsWith('  output '));
    expect(JSON.parse(outputLine?.slice('  output '.length) ?? 'null')).toEqual({
      title: 'Basket',
      price: 12.5,
    });
    // A schema the API cannot take is its 422, before any run is made.
    const refused = await cli([
      'runs',
      'submit',
      '--profile',
      'cli-output',
      '--input',
      'x',
      '--output-schema',
      '{"type": "object", "$id": "https://elsewhere.example/schema"}',
    ]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^error validation_failed/);
  });

  it('ends runs watch non-zero with the error code of a failed run, and retries it as a new attempt', async () => {
    const profile = await newProfile('cli-failing');
    const submitted = await cliJson([
      'runs',
      'submit',
      '--profile',
      profile,
      '--input',
      'Go where the profile may not',
      '--script',
      JSON.stringify({ steps: [{ tool: 'browser.navigate', url: 'http://127.0.0.2:9/' }], answer: 'No.' }),
    ]);
    const watched = await cli(['runs', 'watch', submitted.id]);
    expect(watched.code).toBe(1);
    expect(watched.stdout + watched.stderr).toMatch(/failed.*url_disallowed/);

    const retried = await cliJson(['runs', 'retry', submitted.id]);
    expect(retried).toMatchObject({ id: submitted.id, attempt: 2 });
    expect(['queued', 'running', 'failed']).toContain(retried.status);
    const again = await cli(['runs', 'watch', submitted.id, '--json']);
    expect(again.code).toBe(1);
    const events = jsonLines(again.stdout) as Array<{ type: string }>;
    expect(events.map((event) => event.type)).toContain('run.retried');
  });

  it('cancels a parked run (its watch exits 3) and denies an approval with a reason', async () => {
    const profile = await newProfile('cli-decided');
    const purchasesBefore = purchases;
    const script = JSON.stringify(buyScript('cancelled'));
    const first = await cliJson([
      'runs',
      'submit',
      '--profile',
      profile,
      '--input',
      'Buy',
      '--script',
      script,
    ]);
    await parkedApproval(first.id);
    const cancelled = await cliJson(['runs', 'cancel', first.id]);
    expect(cancelled).toMatchObject({ id: first.id, status: 'cancelled' });
    const watched = await cli(['runs', 'watch', first.id]);
    expect(watched.code).toBe(3);
    expect(watched.stdout + watched.stderr).toMatch(/cancelled/);
    // The status said once, by the last line.
    const cancelledLines = watched.stdout.trimEnd().split('\n');
    expect(cancelledLines.at(-1)).toBe(`run ${first.id} cancelled`);
    expect(cancelledLines.filter((line) => /cancelled/.test(line))).toHaveLength(1);

    const second = await cliJson([
      'runs',
      'submit',
      '--profile',
      profile,
      '--input',
      'Buy',
      '--script',
      script,
    ]);
    const approvalId = await parkedApproval(second.id);
    const denied = await cliJson(['approvals', 'deny', approvalId, '--reason', 'not this one']);
    expect(denied).toMatchObject({ id: approvalId, status: 'denied' });
    const ended = await cli(['runs', 'watch', second.id]);
    expect(ended.code).toBe(1);
    expect(ended.stdout + ended.stderr).toMatch(/approval_denied/);
    expect(purchases).toBe(purchasesBefore);
  });

  it('takes a run’s page over when its script asks for a person, and hands it back', async () => {
    const profile = await newProfile('cli-person');
    const submitted = await cliJson([
      'runs',
      'submit',
      '--profile',
      profile,
      '--input',
      'Sign in for me',
      '--script',
      JSON.stringify({
        steps: [
          { tool: 'browser.navigate', url: `${origin}/person/` },
          { person: 'Sign in, then hand back' },
        ],
        answer: 'Handed back.',
      }),
    ]);
    const parked = await eventually(
      () => cliJson(['runs', 'get', submitted.id]),
      (view) => view.status !== 'queued' && view.status !== 'running',
      30_000,
      200,
    );
    expect({ status: parked.status, error: parked.error }).toEqual({ status: 'parked', error: null });
    const taken = await cli(['runs', 'takeover', submitted.id]);
    expect(taken.code).toBe(0);
    expect(taken.stdout).toMatch(new RegExp(`^${submitted.id} held by principal:dev until `));
    const again = await cliJson(['runs', 'takeover', submitted.id]);
    expect(again).toMatchObject({ run_id: submitted.id, state: 'held', holder: 'principal:dev' });
    const back = await cliJson(['runs', 'handback', submitted.id]);
    expect(back).toMatchObject({ run_id: submitted.id, state: 'handed_back', inputs: 0 });
    const watched = await cli(['runs', 'watch', submitted.id]);
    expect(watched.code).toBe(0);
    // Handed back already: a second hand-back is refused with the API's error.
    const refused = await cli(['runs', 'handback', submitted.id]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/conflict/);
  });

  it('creates, lists and revokes API keys; a revoked key is refused with the API error', async () => {
    const created = await cliJson(['keys', 'create', '--scope', 'runs:read', '--principal', 'bot@cli']);
    expect(created).toMatchObject({
      principal: 'bot@cli',
      scopes: ['runs:read'],
      key: expect.stringMatching(/^lhk_/),
    });
    const listed = await cliJson(['keys', 'list']);
    expect(listed.api_keys.map((key: { key_id: string }) => key.key_id)).toContain(created.key_id);
    expect(JSON.stringify(listed)).not.toContain(created.key);

    expect((await cli(['runs', 'list', '--json'], { LEASEHOLD_API_KEY: created.key })).code).toBe(0);
    expect((await cli(['keys', 'revoke', created.key_id])).code).toBe(0);
    const refused = await cli(['runs', 'list', '--api-key', created.key]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^error unauthorized: /);
  });

  it('resumes a cut event stream from the last event it printed, printing each event once', async () => {
    const profile = await newProfile('cli-resumed');
    const submitted = await cliJson([
      'runs',
      'submit',
      '--profile',
      profile,
      '--input',
      'Look at the basket',
      '--script',
      JSON.stringify({ steps: [{ tool: 'browser.navigate', url: `${origin}/look/` }], answer: 'Seen.' }),
    ]);
    const direct = await cli(['runs', 'watch', submitted.id, '--json']);
    expect(direct.code).toBe(0);
    const events = jsonLines(direct.stdout) as Array<{ id: string; type: string }>;
    expect(events.map((event) => event.type)).toContain('run.succeeded');

    // Between the CLI and the API: the first two event streams are cut after their first event.
    const resumedFrom: Array<string | undefined> = [];
    const api = new URL(fleet.urls.api);
    const proxy = createServer((request, response) => {
      const events = /\/events$/.test(request.url ?? '');
      if (events) resumedFrom.push(request.headers['last-event-id'] as string | undefined);
      const cut = events && resumedFrom.length <= 2;
      const upstream = httpRequest(
        {
          host: api.hostname,
          port: api.port,
          path: request.url,
          method: request.method,
          headers: request.headers,
        },
        (answer) => {
          response.writeHead(answer.statusCode ?? 502, answer.headers);
          let wasCut = false;
          answer.on('data', (chunk: Buffer) => {
            const end = cut && !wasCut ? chunk.indexOf('\n\n') : -1;
            if (wasCut) return;
            if (end === -1) return void response.write(chunk);
            // Cut once the first event has left: the CLI has it, and its stream breaks without an end.
            wasCut = true;
            response.write(chunk.subarray(0, end + 2), () =>
              setTimeout(() => {
                answer.destroy();
                response.socket?.destroy();
              }, 100),
            );
          });
          answer.on('end', () => {
            if (!wasCut) response.end();
          });
        },
      );
      request.pipe(upstream);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    try {
      const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
      const resumed = await cli(['runs', 'watch', submitted.id, '--json', '--api-url', proxyUrl]);
      expect(resumed.stderr).toBe('');
      expect(resumed.code).toBe(0);
      expect(jsonLines(resumed.stdout)).toEqual(events);
      expect(resumedFrom.slice(0, 3)).toEqual([undefined, events[0]?.id, events[1]?.id]);
    } finally {
      await new Promise((resolve) => proxy.close(resolve));
    }
  });

  it('answers bad flags with a usage error (exit 2), API errors with exit 1 and no API with exit 4', async () => {
    const noInput = await cli(['runs', 'submit', '--profile', 'cli-shop']);
    expect(noInput.code).toBe(2);
    expect(noInput.stderr).toMatch(/--input/);
    const version = await cli(['--version']);
    const manifest = JSON.parse(
      await readFile(join(import.meta.dirname, '..', '..', 'package.json'), 'utf8'),
    );
    expect({ code: version.code, stdout: version.stdout }).toEqual({
      code: 0,
      stdout: `${manifest.version}\n`,
    });
    expect((await cli(['runs', 'frobnicate'])).code).toBe(2);
    expect((await cli(['runs', 'list', '--bogus'])).code).toBe(2);
    const badScript = await cli([
      'runs',
      'submit',
      '--profile',
      'cli-shop',
      '--input',
      'x',
      '--script',
      '{no',
    ]);
    expect(badScript.code).toBe(2);
    expect(badScript.stderr).toMatch(/--script/);
    const noKey = await cli(['runs', 'list'], { LEASEHOLD_API_KEY: '' });
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toMatch(/LEASEHOLD_API_KEY/);

    const missing = await cli(['runs', 'get', 'run_missing']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^error not_found: run run_missing not found/);
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const closedUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise((resolve) => closed.close(resolve));
    const unreachable = await cli(['runs', 'list', '--api-url', closedUrl]);
    expect(unreachable.code).toBe(4);
    expect(unreachable.stderr).toMatch(/^error connection_failed: no answer from .*ECONNREFUSED/);
  });

  it("changes a profile's origins, which the next run follows, and refuses to delete it while a run holds it", async () => {
    const other = createServer((_request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end('<!doctype html><title>Other</title><h1>Other shop</h1>');
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const otherOrigin = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
    try {
      await newProfile('cli-moving');
      const changed = await cliJson(['profiles', 'update', 'cli-moving', '--origin', otherOrigin]);
      expect(changed).toMatchObject({ id: 'cli-moving', allowed_origins: [otherOrigin] });
      expect((await cli(['profiles', 'update', 'cli-moving'])).code).toBe(2);

      const navigate = async (url: string) => {
        const run = await cliJson([
          'runs',
          'submit',
          '--profile',
          'cli-moving',
          '--input',
          `go to ${url}`,
          '--script',
          JSON.stringify({ steps: [{ tool: 'browser.navigate', url }], answer: 'there' }),
        ]);
        return (await cli(['runs', 'watch', run.id])).code;
      };
      expect(await navigate(`${otherOrigin}/`)).toBe(0);
      expect(await navigate(`${origin}/`)).toBe(1);

      const held = await cliJson([
        'runs',
        'submit',
        '--profile',
        'cli-moving',
        '--input',
        'buy there',
        '--script',
        JSON.stringify({
          steps: [
            { tool: 'browser.navigate', url: `${otherOrigin}/` },
            { tool: 'browser.act', target: { role: 'heading', name: 'Other shop' }, action: 'click' },
          ],
          answer: 'done',
        }),
      ]);
      await parkedApproval(held.id);
      const refused = await cli(['profiles', 'delete', 'cli-moving']);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(new RegExp(`^error conflict: .*${held.id}`));

      await cliJson(['runs', 'cancel', held.id]);
      const deleted = await eventually(
        () => cli(['profiles', 'delete', 'cli-moving']),
        (result) => result.code === 0,
        30_000,
        200,
      );
      expect(deleted.stdout).toBe('profile cli-moving deleted\n');
      expect((await cliJson(['profiles', 'list'])).profiles.map((p: { id: string }) => p.id)).not.toContain(
        'cli-moving',
      );
    } finally {
      await new Promise((resolve) => other.close(resolve));
    }
  });
});
