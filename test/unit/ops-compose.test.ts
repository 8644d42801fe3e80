import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { envSchema } from '../../libs/config/env.js';

/**
 * The compose file of a multi-process fleet on one host, as docker-compose (Debian's
 * 1.29) reads it: valid, every role present, two browser workers whose pins do not overlap and
 * whose advertised URLs the other containers resolve, Prometheus scraping every role.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SECRETS = { LEASEHOLD_DATA_PLANE_TOKEN: 'a'.repeat(64), LEASEHOLD_SEAL_KEY: 'b'.repeat(64) };
/** Variables the containers get that are not settings: the image's role switch and the model key. */
const NOT_SETTINGS = new Set(['LEASEHOLD_ROLE', 'OPENAI_API_KEY']);
const ROLE_PORT: Record<string, string> = {
  api: 'PORT',
  'run-worker': 'RUN_WORKER_PORT',
  'browser-worker': 'BROWSER_WORKER_PORT',
  sweeper: 'SWEEPER_PORT',
};

interface ComposeService {
  image?: string;
  environment?: Record<string, string>;
  security_opt?: string[];
  volumes?: (string | { source?: string; target: string })[];
}

function compose(args: string[], env: Record<string, string> = SECRETS) {
  const { PATH, HOME } = process.env;
  return spawnSync('docker-compose', ['-f', 'compose.yaml', ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 20_000,
    env: { PATH, HOME, ...env },
  });
}

let services: Record<string, ComposeService> = {};
let validation: ReturnType<typeof compose>;
// One `docker-compose config` serves every check: it validates as `config -q` does, and prints the
// file resolved (anchors merged, variables interpolated). Each spawn costs seconds of Python start-up.
beforeAll(() => {
  validation = compose(['config']);
  services =
    (parse(validation.stdout || '{}') as { services?: Record<string, ComposeService> }).services ?? {};
});

const ofRole = (role: string) =>
  Object.entries(services).filter(([, service]) => service.environment?.LEASEHOLD_ROLE === role);
const volumeTargets = (service: ComposeService) =>
  (service.volumes ?? []).map((volume) =>
    typeof volume === 'string' ? volume : `${volume.source}:${volume.target}`,
  );

/** Whether two BROWSER_WORKER_PROFILES values could both claim one profile. */
function pinsOverlap(a: string, b: string): boolean {
  const parsed = (value: string) => {
    const pins = envSchema.shape.BROWSER_WORKER_PROFILES.parse(value);
    if (pins === '*') return '*';
    return pins;
  };
  const left = parsed(a);
  const right = parsed(b);
  if (left === '*' || right === '*') return true;
  const tenant = (pin: string) => pin.split('/')[0];
  return left.some((one) =>
    right.some(
      (other) =>
        one === other || (tenant(one) === tenant(other) && (one.endsWith('/*') || other.endsWith('/*'))),
    ),
  );
}

describe('the compose file (compose.yaml)', () => {
  it('passes docker-compose config', () => {
    expect(validation.stderr).toBe('');
    expect(validation.status).toBe(0);
  });

  it('refuses to start without the data-plane token and the seal key', () => {
    const result = compose(['config', '-q'], {});
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/LEASEHOLD_DATA_PLANE_TOKEN|LEASEHOLD_SEAL_KEY/);
  });

  it('runs Redis with ops/redis.conf, the API, two run workers, two browser workers, the sweeper, Prometheus and Grafana', () => {
    expect(ofRole('api')).toHaveLength(1);
    expect(ofRole('run-worker')).toHaveLength(2);
    expect(ofRole('browser-worker')).toHaveLength(2);
    expect(ofRole('sweeper')).toHaveLength(1);
    expect(volumeTargets(services.redis ?? {}).some((volume) => /ops\/redis\.conf:/.test(volume))).toBe(true);
    expect(services.prometheus?.image).toMatch(/^prom\/prometheus:/);
    const grafana = volumeTargets(services.grafana ?? {});
    expect(
      grafana.some((volume) => /ops\/grafana\/provisioning:\/etc\/grafana\/provisioning/.test(volume)),
    ).toBe(true);
    expect(grafana.some((volume) => /ops\/grafana\/leasehold\.json:/.test(volume))).toBe(true);
  });

  it('gives the two browser workers disjoint pins, their own ids and URLs the others resolve', () => {
    const [[firstName, first], [secondName, second]] = ofRole('browser-worker') as [
      [string, ComposeService],
      [string, ComposeService],
    ];
    const env = (service: ComposeService) => service.environment ?? {};
    expect(
      pinsOverlap(env(first).BROWSER_WORKER_PROFILES ?? '*', env(second).BROWSER_WORKER_PROFILES ?? '*'),
    ).toBe(false);
    expect(env(first).BROWSER_WORKER_ID).not.toBe(env(second).BROWSER_WORKER_ID);
    for (const [name, service] of [
      [firstName, first],
      [secondName, second],
    ] as const) {
      expect(env(service).BROWSER_WORKER_URL).toBe(`http://${name}:${env(service).BROWSER_WORKER_PORT}`);
      expect(env(service).BROWSER_SANDBOX).toBe('true');
      expect(service.security_opt?.join(' ')).toMatch(/seccomp[:=]\.\/ops\/seccomp\/chromium\.json/);
    }
  });

  it('knows an overlap when it sees one', () => {
    expect(pinsOverlap('acme/*', 'acme/shop')).toBe(true);
    expect(pinsOverlap('*', 'globex/*')).toBe(true);
    expect(pinsOverlap('acme/shop,globex/a', 'globex/a')).toBe(true);
    expect(pinsOverlap('acme/shop', 'acme/blog')).toBe(false);
  });

  it('sets only variables the configuration reads', () => {
    const unknown = Object.entries(services).flatMap(([name, service]) =>
      service.environment?.LEASEHOLD_ROLE
        ? Object.keys(service.environment)
            .filter((key) => !(key in envSchema.shape) && !NOT_SETTINGS.has(key))
            .map((key) => `${name}: ${key}`)
        : [],
    );
    expect(unknown).toEqual([]);
  });

  it('has Prometheus scrape every Leasehold container, each role as its own job', () => {
    const config = parse(readFileSync(`${ROOT}/ops/prometheus/prometheus.yml`, 'utf8')) as {
      scrape_configs: { job_name: string; static_configs: { targets: string[] }[] }[];
    };
    const jobs = new Map(
      config.scrape_configs.map((job) => [
        job.job_name,
        job.static_configs.flatMap((entry) => entry.targets),
      ]),
    );
    for (const [role, portSetting] of Object.entries(ROLE_PORT)) {
      const expected = ofRole(role).map(([name, service]) => `${name}:${service.environment?.[portSetting]}`);
      expect(expected.length, role).toBeGreaterThan(0);
      expect(jobs.get(role)?.sort(), role).toEqual(expected.sort());
    }
  });

  it('builds its images on Node 22 LTS with tini as PID 1, running as a non-root user, Chromium sandboxed', () => {
    for (const file of ['Dockerfile.api', 'Dockerfile.worker']) {
      const text = readFileSync(`${ROOT}/${file}`, 'utf8');
      const stages = [...text.matchAll(/^FROM (\S+)/gm)].map((match) => match[1]);
      expect(stages.length, file).toBeGreaterThan(0);
      for (const image of stages) expect(image, file).toBe('node:22-bookworm-slim');
      expect(text, file).toMatch(/^ENTRYPOINT \["\/usr\/bin\/tini", "--"\]$/m);
      expect(text, file).toMatch(/apt-get install [^\n]*\btini\b/);
      const users = [...text.matchAll(/^USER (\S+)/gm)].map((match) => match[1]);
      expect(users.at(-1), file).toBe('node');
    }
    const worker = readFileSync(`${ROOT}/Dockerfile.worker`, 'utf8');
    expect(worker).toMatch(/\bBROWSER_SANDBOX=true\b/);
    expect(worker).not.toMatch(/BROWSER_SANDBOX=false\s*\\?$/m);
  });

  it("copies into each image's build every folder the build compiles", () => {
    // What `npm run build` compiles, imports followed: a folder left out of COPY fails the image.
    const listed = spawnSync('npx', ['tsc', '-p', 'tsconfig.build.json', '--listFilesOnly'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(listed.status, listed.stderr).toBe(0);
    const folders = new Set(
      listed.stdout
        .split('\n')
        .filter((file) => file.startsWith(ROOT) && !file.includes('/node_modules/'))
        .map((file) => file.slice(ROOT.length).replace(/^\//, '').split('/')[0]),
    );
    expect(folders).toContain('apps');
    for (const file of ['Dockerfile.api', 'Dockerfile.worker']) {
      const text = readFileSync(`${ROOT}/${file}`, 'utf8');
      const copied = new Set(
        [...text.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((m) => m[1]?.split(' ') ?? []),
      );
      for (const folder of folders)
        expect(
          [...copied].some((source) => source === folder || source.startsWith(`${folder}/`)),
          `${file} copies ${folder}`,
        ).toBe(true);
    }
  });

  it('gives Chromium a seccomp profile that refuses by default and allows the sandbox its namespaces', () => {
    const profile = JSON.parse(readFileSync(`${ROOT}/ops/seccomp/chromium.json`, 'utf8')) as {
      defaultAction: string;
      syscalls: { names: string[]; action: string; args?: unknown[] }[];
    };
    expect(profile.defaultAction).toBe('SCMP_ACT_ERRNO');
    const allowed = new Set(
      profile.syscalls
        .filter((rule) => rule.action === 'SCMP_ACT_ALLOW' && !rule.args)
        .flatMap((rule) => rule.names),
    );
    for (const call of ['clone', 'clone3', 'unshare', 'setns', 'chroot', 'seccomp', 'prctl'])
      expect(allowed).toContain(call);
    for (const call of [
      'mount',
      'ptrace',
      'kexec_load',
      'init_module',
      'bpf',
      'keyctl',
      'reboot',
      'personality',
    ])
      expect(allowed).not.toContain(call);
  });
});
