import { spawn } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

const ROOT = join(import.meta.dirname, '..', '..');
/** The mark in README.md before each shell block this test runs, in order, as one script. */
const EXAMPLE_MARK = '<!-- example: runs as written by test/e2e/readme-examples.test.ts -->';
/** The README's page: the one thing the test substitutes. */
const README_PAGE = 'https://example.com';

/** A marked block: shell, or TypeScript run with tsx from the repository's root. */
interface ReadmeExample {
  language: 'sh' | 'ts';
  code: string;
}

/** The README's marked blocks, in order. */
function readmeExamples(readme: string): ReadmeExample[] {
  const mark = EXAMPLE_MARK.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const pattern = new RegExp(`${mark}\\n\`\`\`(sh|ts)\\n([\\s\\S]*?)\`\`\``, 'g');
  return [...readme.matchAll(pattern)].map((match) => ({
    language: match[1] as 'sh' | 'ts',
    code: match[2] ?? '',
  }));
}

/**
 * The examples as one bash script: a TypeScript block is written to a file at the repository's
 * root (its imports are the checkout's paths) and run there with tsx, as a reader would.
 */
function scriptOf(examples: ReadmeExample[], page: string): { script: string; files: string[] } {
  const files: string[] = [];
  // -x: each command is traced to stderr, so a failure's tail names the command that stopped it.
  const lines = ['set -euxo pipefail'];
  for (const example of examples) {
    const code = example.code.replaceAll(README_PAGE, page);
    if (example.language === 'sh') {
      lines.push(code);
      continue;
    }
    const file = `readme-example-${files.length + 1}.ts`;
    writeFileSync(join(ROOT, file), code);
    files.push(file);
    lines.push(`npx tsx ${file}`);
  }
  return { script: lines.join('\n'), files };
}

function runScript(
  script: string,
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', script], { cwd: ROOT, env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * The README's examples run as written — a live fleet, a local page standing in for
 * https://example.com (the only substitution), the API's URL and key in `API` and `KEY` as the
 * README says, and every marked block in one bash script with `set -euo pipefail` (and -x, to trace).
 */
describe('the README examples', { timeout: 240_000 }, () => {
  const prefix = uniquePrefix('readme');
  let fleet: FleetHandle;
  let site: Server;
  let origin: string;
  let files: string[] = [];
  const { call } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    site = createServer((request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end(
        request.url === '/'
          ? '<!doctype html><title>Example Domain</title><h1>Example Domain</h1><a href="/more">Learn more</a>'
          : '<!doctype html><title>More</title><h1>More</h1>',
      );
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    fleet = await startTestFleet(prefix);
  });

  afterAll(async () => {
    await fleet?.close();
    await new Promise((resolve) => site?.close(resolve));
    for (const file of ['step.jpg', 'claims.csv', ...files]) rmSync(join(ROOT, file), { force: true });
  });

  it('run as written against a live fleet and a local page', async () => {
    const examples = readmeExamples(readFileSync(join(ROOT, 'README.md'), 'utf8'));
    expect(examples.filter((example) => example.language === 'sh').length).toBeGreaterThanOrEqual(3);
    expect(examples.some((example) => example.language === 'ts')).toBe(true);
    const written = scriptOf(examples, origin);
    files = written.files;
    const script = written.script;
    const ran = await runScript(script, {
      API: fleet.urls.api.replace(/\/v1$/, ''),
      KEY: fleet.apiKey,
      REDIS_URL: testRedisUrl(),
      LEASEHOLD_KEY_PREFIX: `${prefix}:`,
    });
    // On failure, the end of what the script printed, and its trace, say which command stopped it.
    expect({ code: ran.code, tail: `${ran.stdout.slice(-1_500)}\n${ran.stderr.slice(-1_500)}` }).toEqual({
      code: 0,
      tail: expect.any(String),
    });

    // What the examples did, read back: the approved runs (curl's and the CLI's) succeeded on the
    // page, the denied one failed approval_denied, was retried and cancelled
    const runs = (await call('GET', '/v1/runs?limit=20')).body.runs as Array<{
      status: string;
      attempt: number;
      error: { code: string } | null;
    }>;
    // (and the run whose answer took an output schema).
    expect(runs.map((run) => run.status).sort()).toEqual([
      'cancelled',
      'succeeded',
      'succeeded',
      'succeeded',
    ]);
    expect(ran.stdout).toContain('{"price":12.5,"title":"Example"}');
    expect(runs.find((run) => run.status === 'cancelled')?.attempt).toBe(2);
    expect(ran.stdout).toContain('"status": "succeeded"');
    // The typed client listed the succeeded runs; MCP's tools/list named the runs mode's tools.
    expect(ran.stdout).toMatch(/run_\S+ succeeded \d+\/160 tool calls/);
    expect(ran.stdout).toContain('"name":"wait_for_run"');
    expect(readFileSync(join(ROOT, 'step.jpg')).subarray(0, 2)).toEqual(Buffer.from([0xff, 0xd8]));
  });
});
