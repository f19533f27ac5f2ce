// metricsConfig.auth on a real API server: with nothing but the operator's own
// RBAC from dist/east.k8s.yaml (its TokenRequest token, never the admin's), the operator's token source mints a
// 10-minute, Pod-unbound token for the site's metrics scraper ServiceAccount; the API server's TokenReview accepts
// it as that ServiceAccount; an EPP-like HTTPS /metrics endpoint that authorizes with TokenReview and
// SubjectAccessReview (as an llm-d EPP does) serves the scrape; and the operator can mint for no other account.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { createLogger } from '../../daemons/shared/log.ts';
import { KubernetesStore } from '../../daemons/shared/resource-store/kubernetes-store.ts';
import { ResourceStoreError } from '../../daemons/shared/resource-store/errors.ts';
import { createCertificateAuthority, createServerCertificate } from '../../daemons/shared/tls.ts';
import { ScraperTokenSource } from '../../daemons/gossip-operator/probes/scraper-token.ts';
import { scrapeMetrics } from '../../daemons/gossip-operator/probes/metrics-scrape.ts';
import { startServer, type TestServer } from '../gossip-operator/probes/servers.ts';
import { renderKubeconfig } from './certs.ts';
import { adminKubeConfig } from './kube.ts';
import { applyManifests, readManifests, RawClient } from './manifests.ts';

const NAMESPACE = 'grid-system';
const east = readManifests('east.k8s.yaml');
// The scraper account the operator Deployment is configured with, read from dist/ rather than restated.
const SCRAPER = (() => {
  for (const m of east) {
    if (m.object.kind !== 'Deployment') continue;
    const containers = (
      m.object['spec'] as { template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } } }
    ).template.spec.containers;
    for (const c of containers)
      for (const e of c.env ?? []) if (e.name === 'GRID_METRICS_SCRAPER_SERVICE_ACCOUNT') return e.value ?? '';
  }
  throw new Error('dist/east.k8s.yaml configures no GRID_METRICS_SCRAPER_SERVICE_ACCOUNT');
})();

let admin: RawClient;
let workDir: string;
let operatorStore: KubernetesStore;
let epp: TestServer | undefined;
let eppCa: string;
const logLines: string[] = [];

function jwtClaims(token: string): Record<string, unknown> {
  const payload = token.split('.')[1];
  if (payload === undefined) throw new Error('not a JWT');
  return JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
}

async function tokenReview(token: string): Promise<{
  authenticated?: boolean;
  user?: { username?: string; groups?: string[]; extra?: Record<string, string[]> };
}> {
  const res = await admin.request('POST', '/apis/authentication.k8s.io/v1/tokenreviews', {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenReview',
    spec: { token },
  });
  if (res.status !== 201) throw new Error(`TokenReview: HTTP ${res.status}`);
  return (res.body as { status: { authenticated?: boolean; user?: { username?: string; groups?: string[] } } }).status;
}

beforeAll(async () => {
  admin = new RawClient(adminKubeConfig());
  await applyManifests(admin, ['crds.k8s.yaml', 'east.k8s.yaml']);
  const res = await admin.request('POST', `/api/v1/namespaces/${NAMESPACE}/serviceaccounts/gossip-operator/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 3600 },
  });
  if (res.status !== 201) throw new Error(`TokenRequest for gossip-operator: HTTP ${res.status}`);
  const operatorToken = (res.body as { status: { token: string } }).status.token;
  workDir = await mkdtemp(join(tmpdir(), 'agn-scraper-token-'));
  const kubeconfigPath = join(workDir, 'operator.kubeconfig');
  await writeFile(
    kubeconfigPath,
    renderKubeconfig(inject('apiServerUrl'), inject('caPem'), { name: 'gossip-operator', token: operatorToken }),
    { mode: 0o600 },
  );
  operatorStore = new KubernetesStore({ kubeconfigPath });

  // An EPP-like endpoint: /metrics behind TokenReview and a SubjectAccessReview for get on the nonResourceURL.
  const ca = await createCertificateAuthority();
  eppCa = ca.certPem;
  const leaf = await createServerCertificate(ca, { commonName: 'epp', sans: ['127.0.0.1'] });
  epp = await startServer(
    (req, res) => {
      void (async () => {
        const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
        const review = token === undefined ? undefined : await tokenReview(token);
        if (review?.authenticated !== true || review.user?.username === undefined) return res.writeHead(401).end();
        const sar = await admin.request('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: {
            user: review.user.username,
            groups: review.user.groups ?? [],
            nonResourceAttributes: { path: '/metrics', verb: 'get' },
          },
        });
        if ((sar.body as { status?: { allowed?: boolean } }).status?.allowed !== true) return res.writeHead(403).end();
        res
          .writeHead(200, { 'content-type': 'text/plain' })
          .end('llm_d_epp_average_queue_size{name="qwen3-pool"} 0.4\n');
      })().catch(() => res.writeHead(500).end());
    },
    { cert: leaf.certPem, key: leaf.keyPem },
  );
});

afterAll(async () => {
  await epp?.close();
  await operatorStore?.close();
  if (workDir !== undefined) await rm(workDir, { recursive: true, force: true });
});

function tokenSource(serviceAccount = SCRAPER): ScraperTokenSource {
  const logger = createLogger({
    name: 'scraper-token-test',
    destination: { write: (line: string) => void logLines.push(line) },
  });
  return new ScraperTokenSource({
    store: operatorStore,
    serviceAccount: { namespace: NAMESPACE, name: serviceAccount },
    logger,
    now: Date.now,
  });
}

describe("the metrics scraper token, minted with the operator's own RBAC (dist/east.k8s.yaml)", () => {
  it('is a 10-minute token of the scraper ServiceAccount that TokenReview accepts, bound to no Pod', async () => {
    const result = await tokenSource().bearer();
    expect(result.ok, result.ok ? '' : result.detail).toBe(true);
    if (!result.ok) return;
    const review = await tokenReview(result.token);
    expect(review.authenticated).toBe(true);
    expect(review.user?.username).toBe(`system:serviceaccount:${NAMESPACE}:${SCRAPER}`);
    expect(Object.keys(review.user?.extra ?? {}).filter((k) => k.includes('pod'))).toEqual([]);
    const claims = jwtClaims(result.token);
    expect(Number(claims['exp']) - Number(claims['iat'])).toBe(600);
    const k8s = claims['kubernetes.io'] as { serviceaccount?: { name?: string }; pod?: unknown };
    expect(k8s.serviceaccount?.name).toBe(SCRAPER);
    expect(k8s.pod).toBeUndefined();
  });

  it('is accepted by an endpoint that authorizes /metrics with TokenReview and SubjectAccessReview', async () => {
    const tokens = tokenSource();
    const outcome = await scrapeMetrics(
      {
        url: new URL(`${epp!.url}/metrics`),
        timeoutMs: 10_000,
        signalNames: { queueDepth: 'llm_d_epp_average_queue_size' },
        poolName: 'qwen3-pool',
        tls: { ca: eppCa },
        bearer: () => tokens.bearer(),
      },
      undefined,
      Date.now(),
    );
    expect(outcome).toMatchObject({ result: 'success', metrics: { queue_depth: 0.4, healthy: true } });
    // A second scrape reuses the token: one TokenRequest for both.
    await scrapeMetrics(
      {
        url: new URL(`${epp!.url}/metrics`),
        timeoutMs: 10_000,
        signalNames: {},
        tls: { ca: eppCa },
        bearer: () => tokens.bearer(),
      },
      undefined,
      Date.now(),
    );
    expect(tokens.mints).toBe(1);
  });

  it('cannot be minted by the operator for any other ServiceAccount, and the scraper token reads nothing', async () => {
    const refused = await tokenSource('gossip-operator').bearer();
    expect(refused.ok).toBe(false);
    if (!refused.ok) expect(refused.detail).toMatch(/forbidden/i);
    await expect(
      operatorStore.createToken(
        { namespace: NAMESPACE, name: 'consumer-gateway-overlay-sync' },
        { expirationSeconds: 600 },
      ),
    ).rejects.toMatchObject({ code: 'forbidden' });

    const minted = await tokenSource().bearer();
    if (!minted.ok) throw new Error(minted.detail);
    const dir = join(workDir, 'scraper.kubeconfig');
    await writeFile(
      dir,
      renderKubeconfig(inject('apiServerUrl'), inject('caPem'), { name: 'scraper', token: minted.token }),
      { mode: 0o600 },
    );
    const asScraper = new KubernetesStore({ kubeconfigPath: dir });
    try {
      const secret = asScraper.get(
        { apiVersion: 'v1', kind: 'Secret', plural: 'secrets', namespaced: true },
        { namespace: NAMESPACE, name: 'swim-key' },
      );
      await expect(secret).rejects.toBeInstanceOf(ResourceStoreError);
      await expect(
        asScraper.createToken({ namespace: NAMESPACE, name: SCRAPER }, { expirationSeconds: 600 }),
      ).rejects.toMatchObject({ code: 'forbidden' });
    } finally {
      await asScraper.close();
    }
    expect(logLines.join('\n')).not.toContain(minted.token);
  });
});
