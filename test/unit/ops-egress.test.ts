import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';

/**
 * What each Leasehold pod may reach, as `kubectl kustomize ops` builds the NetworkPolicies: a
 * browser worker drives Chromium to whatever a profile allows, so its pod must not reach the
 * cloud's metadata address, the private network or the cluster's pods and Services — only DNS,
 * Redis and the internet. The other roles reach only what their code calls. Every object's schema
 * is checked by ops-manifests.test.ts, which builds the same output.
 */

const OPS_DIR = fileURLToPath(new URL('../../ops', import.meta.url));
const K8S_KUSTOMIZATION = fileURLToPath(new URL('../../ops/k8s/kustomization.yaml', import.meta.url));

/** Never reachable through an ipBlock: the private ranges, carrier-grade NAT and link-local (metadata). */
const PRIVATE_RANGES = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', '169.254.0.0/16'];

type Labels = Record<string, string>;
interface Selector {
  matchLabels?: Labels;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}
interface Peer {
  podSelector?: Selector;
  namespaceSelector?: Selector;
  ipBlock?: { cidr: string; except?: string[] };
}
interface EgressRule {
  to?: Peer[];
  ports?: { port?: number | string; protocol?: string }[];
}
type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Labels };
  // biome-ignore lint/suspicious/noExplicitAny: the built objects are read as plain YAML.
  spec: any;
};

/** Whether a label selector selects these labels; an empty selector selects every pod. */
function selects(selector: Selector | undefined, labels: Labels): boolean {
  if (!selector) return true;
  const byLabel = Object.entries(selector.matchLabels ?? {}).every(([key, value]) => labels[key] === value);
  const byExpression = (selector.matchExpressions ?? []).every(({ key, operator, values = [] }) => {
    if (operator === 'In') return key in labels && values.includes(labels[key] as string);
    if (operator === 'NotIn') return !(key in labels) || !values.includes(labels[key] as string);
    if (operator === 'Exists') return key in labels;
    if (operator === 'DoesNotExist') return !(key in labels);
    throw new Error(`unknown selector operator ${operator}`);
  });
  return byLabel && byExpression;
}

let objects: K8sObject[] = [];
beforeAll(() => {
  const output = execFileSync('kubectl', ['kustomize', OPS_DIR], { encoding: 'utf8', timeout: 20_000 });
  objects = parseAllDocuments(output).map((document) => document.toJS() as K8sObject);
});

/** The pod and service CIDRs the operator names: the values ops/k8s/kustomization.yaml's patch adds. */
function clusterCidrs(): string[] {
  const kustomization = readFileSync(K8S_KUSTOMIZATION, 'utf8');
  const patches = (parse(kustomization).patches ?? []) as {
    patch?: string;
    target?: { labelSelector?: string };
  }[];
  const cidrPatch = patches.find((entry) => entry.target?.labelSelector === 'leasehold/egress=internet');
  if (!cidrPatch?.patch) throw new Error('no cluster CIDR patch in ops/k8s/kustomization.yaml');
  return (parse(cidrPatch.patch) as { value: string }[]).map((operation) => operation.value);
}

const workloads = () =>
  objects.filter((object) => object.kind === 'Deployment' || object.kind === 'StatefulSet');
function workloadOf(component: string): K8sObject {
  const found = workloads().find(
    (object) => object.spec.template.metadata.labels['app.kubernetes.io/component'] === component,
  );
  if (!found) throw new Error(`no workload for ${component}`);
  return found;
}
const podLabels = (component: string): Labels => workloadOf(component).spec.template.metadata.labels;
const containerPort = (component: string): number =>
  workloadOf(component).spec.template.spec.containers[0].ports[0].containerPort;
const egressPolicies = () =>
  objects.filter((object) => object.kind === 'NetworkPolicy' && object.spec.policyTypes?.includes('Egress'));
const egressRulesOf = (labels: Labels): EgressRule[] =>
  egressPolicies()
    .filter((policy) => selects(policy.spec.podSelector, labels))
    .flatMap((policy) => policy.spec.egress ?? []);

/**
 * Where egress rules lead, one `destination port` line each: `dns`, a Leasehold component's pods,
 * `internet` (0.0.0.0/0 with every private range and cluster CIDR excepted), and anything else by
 * what makes it wider than that — `anywhere` for a rule without peers, the ipBlock or the peer itself.
 */
function destinationsOf(rules: EgressRule[], exceptRequired: string[]): string[] {
  const lines = new Set<string>();
  for (const rule of rules) {
    const ports = (rule.ports ?? []).map((entry) => `${entry.protocol ?? 'TCP'}/${entry.port ?? '*'}`);
    const peers = rule.to?.length ? rule.to.map(peerName) : ['anywhere'];
    for (const peer of peers) for (const port of ports.length ? ports : ['all']) lines.add(`${peer} ${port}`);
  }
  return [...lines].sort();

  function peerName(peer: Peer): string {
    if (peer.ipBlock) {
      const missing = exceptRequired.filter((cidr) => !peer.ipBlock?.except?.includes(cidr));
      if (peer.ipBlock.cidr === '0.0.0.0/0' && missing.length === 0) return 'internet';
      return `ipBlock ${peer.ipBlock.cidr} open to ${missing.join(',')}`;
    }
    if (
      peer.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name'] === 'kube-system' &&
      Object.keys(peer.namespaceSelector).length === 1 &&
      JSON.stringify(peer.podSelector) === JSON.stringify({ matchLabels: { 'k8s-app': 'kube-dns' } })
    )
      return 'dns';
    if (peer.podSelector && !peer.namespaceSelector) {
      const selected = workloads()
        .map((object) => object.spec.template.metadata.labels as Labels)
        .filter((labels) => selects(peer.podSelector, labels))
        .map((labels) => labels['app.kubernetes.io/component']);
      if (selected.length === 1) return selected[0] as string;
    }
    return `peer ${JSON.stringify(peer)}`;
  }
}

describe('egress of the Leasehold pods (kubectl kustomize ops)', () => {
  const dns = ['dns TCP/53', 'dns UDP/53'];
  const redis = () => `redis TCP/${containerPort('redis')}`;
  const dataPlane = () => `browser-worker TCP/${containerPort('browser-worker')}`;
  const required = () => [...PRIVATE_RANGES, ...clusterCidrs()];

  it('denies every pod of the namespace any egress a rule does not allow', () => {
    const denyAll = egressPolicies().filter(
      (policy) => Object.keys(policy.spec.podSelector ?? {}).length === 0 && !policy.spec.egress?.length,
    );
    expect(denyAll).toHaveLength(1);
    for (const workload of workloads())
      expect(selects(denyAll[0]?.spec.podSelector, workload.spec.template.metadata.labels)).toBe(true);
  });

  it("names the cluster's pod and service CIDRs once, in ops/k8s/kustomization.yaml", () => {
    expect(clusterCidrs().length).toBeGreaterThanOrEqual(2);
    for (const cidr of clusterCidrs()) expect(cidr).toMatch(/^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/);
  });

  it('lets browser workers reach DNS, Redis and the internet, never a private range, the metadata address or the cluster', () => {
    const rules = egressRulesOf(podLabels('browser-worker'));
    expect(destinationsOf(rules, required())).toEqual([...dns, 'internet all', redis()].sort());
    const blocks = rules.flatMap((rule) => rule.to ?? []).filter((peer) => peer.ipBlock);
    expect(blocks.length).toBeGreaterThan(0);
    for (const peer of blocks) {
      expect(peer.ipBlock?.except).toContain('169.254.0.0/16');
      expect(peer.ipBlock?.except).toContain('10.0.0.0/8');
      for (const cidr of clusterCidrs()) expect(peer.ipBlock?.except).toContain(cidr);
    }
  });

  it('lets run workers reach DNS, Redis, the data plane, and the internet on 443 and 80 (models, webhooks)', () => {
    expect(destinationsOf(egressRulesOf(podLabels('run-worker')), required())).toEqual(
      [...dns, redis(), dataPlane(), 'internet TCP/443', 'internet TCP/80'].sort(),
    );
  });

  it('lets the API and the sweeper reach DNS, Redis, the data plane and the artifact store on 443', () => {
    for (const role of ['api', 'sweeper'])
      expect(destinationsOf(egressRulesOf(podLabels(role)), required()), role).toEqual(
        [...dns, redis(), dataPlane(), 'internet TCP/443'].sort(),
      );
  });

  it('lets the development Redis reach nothing', () => {
    expect(destinationsOf(egressRulesOf(podLabels('redis')), required())).toEqual([]);
  });

  it('reads a rule without peers, an ipBlock open to the metadata address and a bare selector as reaching more', () => {
    const all = { matchLabels: {} };
    expect(
      destinationsOf(
        [
          { ports: [{ port: 443 }] },
          { to: [{ ipBlock: { cidr: '0.0.0.0/0', except: ['10.0.0.0/8'] } }] },
          { to: [{ namespaceSelector: all }] },
          { to: [{ podSelector: all }] },
        ],
        ['10.0.0.0/8', '169.254.0.0/16'],
      ),
    ).toEqual([
      'anywhere TCP/443',
      'ipBlock 0.0.0.0/0 open to 169.254.0.0/16 all',
      'peer {"namespaceSelector":{"matchLabels":{}}} all',
      'peer {"podSelector":{"matchLabels":{}}} all',
    ]);
  });
});
