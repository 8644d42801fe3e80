import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { envSchema } from '../../libs/config/env.js';

/**
 * The Kubernetes manifests, as `kubectl kustomize` builds them (Debian's kubectl, whose
 * bundled kustomize is older than the newest), each object validated offline against its schema
 * and the rules that keep a deployment working: the data plane reachable only from its callers,
 * a grace period longer than the process's own shutdown bound, a run worker always up, and only
 * settings the configuration reads.
 */

const OPS_DIR = fileURLToPath(new URL('../../ops', import.meta.url));

// biome-ignore lint/suspicious/noExplicitAny: each model takes the object it validates.
type Model = new (data: any) => { validate(): void };
/** Every kind the manifests may hold, by `apiVersion/kind`; any other kind fails the build. */
const MODELS: Record<string, Model> = {
  'v1/Namespace': Namespace,
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'apps/v1/StatefulSet': StatefulSet,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'keda.sh/v1alpha1/ScaledObject': ScaledObject,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
};

/**
 * Variables the manifests set that are not settings of libs/config/env.ts: the model API key,
 * which ops/models.yaml names as an openai-compatible model's `api_key_env`.
 */
const MODEL_KEY_VARIABLES = new Set(['OPENAI_API_KEY']);
const ROLES = ['api', 'run-worker', 'browser-worker', 'sweeper'] as const;
const DATA_PLANE_CALLERS = ['api', 'run-worker', 'sweeper'];

type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  // biome-ignore lint/suspicious/noExplicitAny: the built objects are read as plain YAML.
  [key: string]: any;
};
interface Container {
  name: string;
  image: string;
  env?: { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[];
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[];
  livenessProbe?: { httpGet?: { path: string } };
  readinessProbe?: { httpGet?: { path: string } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
}

function validateObject(object: K8sObject): void {
  const model = MODELS[`${object.apiVersion}/${object.kind}`];
  if (!model) throw new Error(`no schema for ${object.apiVersion} ${object.kind} ${object.metadata?.name}`);
  new model(object).validate();
}

function build(): K8sObject[] {
  const output = execFileSync('kubectl', ['kustomize', OPS_DIR], { encoding: 'utf8', timeout: 20_000 });
  return parseAllDocuments(output).map((document) => document.toJS() as K8sObject);
}

let objects: K8sObject[] = [];
beforeAll(() => {
  objects = build();
});

const ofKind = (kind: string) => objects.filter((object) => object.kind === kind);
/** An object by name; a generated ConfigMap or Secret by its name before kustomize's hash suffix too. */
const named = (kind: string, name: string) => {
  const found = objects.find(
    (object) =>
      object.kind === kind &&
      (object.metadata.name === name || new RegExp(`^${name}-[a-z0-9]{10}$`).test(object.metadata.name)),
  );
  if (!found) throw new Error(`no ${kind} ${name}`);
  return found;
};
/** The Deployments and StatefulSets that run a Leasehold image, by role. */
function workload(role: string): K8sObject {
  const found = [...ofKind('Deployment'), ...ofKind('StatefulSet')].find(
    (object) => object.spec.template.metadata.labels['app.kubernetes.io/component'] === role,
  );
  if (!found) throw new Error(`no workload for ${role}`);
  return found;
}
const leaseholdContainers = (object: K8sObject): Container[] =>
  (object.spec.template.spec.containers as Container[]).filter((container) =>
    container.image.startsWith('leasehold-'),
  );
const matches = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.entries(selector).every(([key, value]) => labels[key] === value);

describe('the Kubernetes manifests (kubectl kustomize ops)', () => {
  it('validates every object against its schema', () => {
    expect(objects.length).toBeGreaterThan(20);
    for (const object of objects) expect(() => validateObject(object), object.metadata.name).not.toThrow();
  });

  it('refuses an object of a kind it has no schema for, and an object its schema rejects', () => {
    expect(() =>
      validateObject({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' } }),
    ).toThrow(/no schema for example.com\/v1 Widget/);
    const deployment = structuredClone(workload('api'));
    deployment.spec.replicas = 'two';
    expect(() => validateObject(deployment)).toThrow();
  });

  it('puts every namespaced object in the leasehold namespace', () => {
    for (const object of objects.filter((object) => object.kind !== 'Namespace'))
      expect(object.metadata.namespace, `${object.kind} ${object.metadata.name}`).toBe('leasehold');
  });

  it('runs every role, each with probes on /healthz and /readyz, resource requests and a disruption budget', () => {
    const budgets = ofKind('PodDisruptionBudget');
    for (const role of ROLES) {
      const object = workload(role);
      const [container] = leaseholdContainers(object);
      expect(container, role).toBeDefined();
      expect(container?.livenessProbe?.httpGet?.path, role).toBe('/healthz');
      expect(container?.readinessProbe?.httpGet?.path, role).toBe('/readyz');
      expect(container?.resources?.requests?.memory, role).toBeDefined();
      expect(container?.resources?.requests?.cpu, role).toBeDefined();
      const labels = object.spec.template.metadata.labels;
      expect(
        budgets.some((budget) => matches(budget.spec.selector.matchLabels, labels)),
        `a PodDisruptionBudget for ${role}`,
      ).toBe(true);
    }
  });

  it('gives every Leasehold pod longer to stop than its own shutdown bound (SHUTDOWN_TIMEOUT_MS)', () => {
    const defaultMs = envSchema.parse({}).SHUTDOWN_TIMEOUT_MS;
    const setMs = Number(named('ConfigMap', 'leasehold-env').data.SHUTDOWN_TIMEOUT_MS ?? defaultMs);
    for (const role of ROLES) {
      const graceSeconds = workload(role).spec.template.spec.terminationGracePeriodSeconds;
      expect(graceSeconds * 1000, role).toBeGreaterThan(Math.max(defaultMs, setMs));
    }
  });

  it('sets only variables the configuration reads (and the model key ops/models.yaml names)', () => {
    const unknown: string[] = [];
    const check = (where: string, name: string) => {
      if (!(name in envSchema.shape) && !MODEL_KEY_VARIABLES.has(name)) unknown.push(`${where}: ${name}`);
    };
    for (const object of [...ofKind('Deployment'), ...ofKind('StatefulSet')]) {
      for (const container of leaseholdContainers(object)) {
        for (const variable of container.env ?? []) check(object.metadata.name, variable.name);
        for (const source of container.envFrom ?? []) {
          const ref = source.configMapRef ?? source.secretRef;
          const kind = source.configMapRef ? 'ConfigMap' : 'Secret';
          if (!ref) continue;
          const from = named(kind, ref.name);
          for (const key of Object.keys(from.data ?? {})) check(`${object.metadata.name} ${ref.name}`, key);
        }
      }
    }
    expect(unknown).toEqual([]);
    // Never vacuous: the shared settings come through envFrom.
    expect(Object.keys(named('ConfigMap', 'leasehold-env').data)).toContain('HOST');
  });

  it('scales run workers on the runs queue, waiting and prioritised jobs alike, never below one', () => {
    const scaledObjects = ofKind('ScaledObject');
    expect(scaledObjects).toHaveLength(1);
    const scaled = scaledObjects[0] as K8sObject;
    expect(scaled.spec.scaleTargetRef.name).toBe(workload('run-worker').metadata.name);
    expect(scaled.spec.minReplicaCount).toBeGreaterThanOrEqual(1);
    const queries = (scaled.spec.triggers as { type: string; metadata: { query?: string } }[]).map(
      (trigger) => `${trigger.type} ${trigger.metadata.query ?? ''}`,
    );
    // KEDA's redis scaler reads the wait list alone; prioritised jobs sit in a sorted set.
    expect(queries.join('\n')).not.toMatch(/^redis /m);
    expect(queries.join('\n')).toMatch(
      /^prometheus .*leasehold_queue_jobs\{queue="runs",state=~?"[^"]*waiting/m,
    );
  });

  it('gives each browser worker a stable id, its own pins and a URL other pods reach', () => {
    const browser = workload('browser-worker');
    expect(browser.kind).toBe('StatefulSet');
    const headless = named('Service', browser.spec.serviceName);
    expect(headless.spec.clusterIP).toBe('None');
    const env = new Map(leaseholdContainers(browser)[0]?.env?.map((variable) => [variable.name, variable]));
    expect(env.get('BROWSER_WORKER_ID')?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.name');
    const port = Number(env.get('BROWSER_WORKER_PORT')?.value);
    expect(env.get('BROWSER_WORKER_URL')?.value).toBe(
      `http://$(BROWSER_WORKER_ID).${headless.metadata.name}:${port}`,
    );
    expect(headless.spec.ports.map((entry: { port: number }) => entry.port)).toContain(port);
    // The pins come from a ConfigMap keyed by pod name, read by the container's command.
    const pins = named(
      'ConfigMap',
      browser.spec.template.spec.volumes.find((v: { name: string }) => v.name === 'pins').configMap.name,
    );
    expect(Object.keys(pins.data)).toContain(`${browser.metadata.name}-0`);
    expect(
      leaseholdContainers(browser)[0]?.env?.some(
        (variable) => variable.name === 'BROWSER_SANDBOX' && variable.value === 'true',
      ),
    ).toBe(true);
    expect(browser.spec.template.spec.securityContext.seccompProfile).toEqual({
      type: 'Localhost',
      localhostProfile: 'leasehold/chromium.json',
    });
  });

  it('lets only run workers, the API and the sweeper (and Prometheus, for /metrics) reach the data plane', () => {
    const browserLabels = workload('browser-worker').spec.template.metadata.labels;
    // The ingress policies of the browser workers (their egress is ops-egress.test.ts's).
    const policies = ofKind('NetworkPolicy').filter(
      (policy) =>
        policy.spec.policyTypes.includes('Ingress') &&
        matches(policy.spec.podSelector.matchLabels ?? {}, browserLabels),
    );
    expect(policies.length).toBeGreaterThan(0);
    const admitted = new Set<string>();
    for (const policy of policies) {
      for (const rule of policy.spec.ingress) {
        // A rule without peers admits everyone.
        expect(rule.from?.length, policy.metadata.name).toBeGreaterThan(0);
        for (const peer of rule.from) {
          expect(peer.ipBlock, policy.metadata.name).toBeUndefined();
          if (peer.namespaceSelector) {
            // Prometheus, from its own namespace, for /metrics: it holds no data-plane token.
            expect(peer.namespaceSelector.matchLabels).toEqual({
              'kubernetes.io/metadata.name': 'monitoring',
            });
            expect(peer.podSelector?.matchLabels).toEqual({ 'app.kubernetes.io/name': 'prometheus' });
            admitted.add('prometheus');
            continue;
          }
          const component = peer.podSelector?.matchLabels?.['app.kubernetes.io/component'];
          expect(DATA_PLANE_CALLERS, `${policy.metadata.name} admits ${JSON.stringify(peer)}`).toContain(
            component,
          );
          admitted.add(component);
        }
      }
    }
    expect([...admitted].sort()).toEqual([...DATA_PLANE_CALLERS, 'prometheus'].sort());
    const dataPlane = named('NetworkPolicy', 'browser-worker-data-plane');
    const callers = dataPlane.spec.ingress.flatMap(
      (rule: { from: { podSelector: { matchLabels: Record<string, string> } }[] }) =>
        rule.from.map((peer) => peer.podSelector.matchLabels['app.kubernetes.io/component']),
    );
    expect(callers.sort()).toEqual([...DATA_PLANE_CALLERS].sort());
  });

  it('has Prometheus scrape every role through a ServiceMonitor', () => {
    const services = ofKind('Service');
    const monitors = ofKind('ServiceMonitor');
    for (const role of ROLES) {
      const labels = workload(role).spec.template.metadata.labels;
      const monitor = monitors.find(
        (candidate) => candidate.spec.selector.matchLabels['app.kubernetes.io/component'] === role,
      );
      expect(monitor, role).toBeDefined();
      expect(monitor?.spec.endpoints[0].path).toBe('/metrics');
      const service = services.find(
        (candidate) =>
          matches(monitor?.spec.selector.matchLabels ?? {}, candidate.metadata.labels ?? {}) &&
          matches(candidate.spec.selector, labels),
      );
      expect(service, `a Service for ${role}'s ServiceMonitor`).toBeDefined();
      expect(service?.spec.ports.map((entry: { name: string }) => entry.name)).toContain(
        monitor?.spec.endpoints[0].port,
      );
    }
  });

  it('runs the development Redis with ops/redis.conf (AOF) on a volume of its own', () => {
    const redis = named('StatefulSet', 'redis');
    const conf = named(
      'ConfigMap',
      redis.spec.template.spec.volumes.find((v: { name: string }) => v.name === 'conf').configMap.name,
    );
    expect(conf.data['redis.conf']).toMatch(/^appendonly yes$/m);
    expect(conf.data['redis.conf']).toMatch(/^maxmemory-policy noeviction$/m);
    expect(redis.spec.volumeClaimTemplates[0].metadata.name).toBe('data');
  });
});
