import { Writable } from 'node:stream';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../daemons/shared/log.ts';
import { createCertificateAuthority, createServerCertificate } from '../../../daemons/shared/tls.ts';
import { openLocalStore, type LocalStore } from '../../../daemons/shared/resource-store/index.ts';
import { ResourceStoreError } from '../../../daemons/shared/resource-store/errors.ts';
import type {
  ObjectRef,
  ServiceAccountToken,
  TokenRequestOptions,
} from '../../../daemons/shared/resource-store/types.ts';
import { ScraperTokenSource } from '../../../daemons/gossip-operator/probes/scraper-token.ts';
import { ProviderSignals } from '../../../daemons/gossip-operator/controllers/provider-signals.ts';
import { OperatorMetrics } from '../../../daemons/gossip-operator/metrics.ts';
import type { InferenceProviderResource } from '../../../schemas/crds/types.ts';
import { type TestServer, startServer } from './servers.ts';

const SA = { namespace: 'grid-system', name: 'gossip-operator-metrics-scraper' };

/** Captures every log line as text so tests can assert what was (not) logged. */
function capturedLogger() {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(
        ...chunk
          .toString('utf8')
          .split('\n')
          .filter((l) => l !== ''),
      );
      done();
    },
  });
  const logger = createLogger({ name: 'test', level: 'debug', destination });
  const warnings = () =>
    lines.map((l) => JSON.parse(l) as { level: string; msg: string }).filter((l) => l.level === 'warn');
  return { logger, lines, warnings };
}

/**
 * Stands in for the API server's TokenRequest endpoint with a programmable answer; the real endpoint is exercised by
 * the cluster suite (test/cluster/scraper-token.test.ts).
 */
class Minter {
  readonly requests: { ref: ObjectRef; options: TokenRequestOptions }[] = [];
  now = 0;
  lifetimeSeconds = 600;
  failWith: string | undefined;
  gate: Promise<void> | undefined;

  async createToken(ref: ObjectRef, options: TokenRequestOptions): Promise<ServiceAccountToken> {
    this.requests.push({ ref, options });
    const n = this.requests.length;
    if (this.gate !== undefined) await this.gate;
    if (this.failWith !== undefined) throw new ResourceStoreError('forbidden', this.failWith, { statusCode: 403 });
    return {
      token: `eyJ.secret-token-${n}.sig`,
      expirationTimestamp: new Date(this.now + this.lifetimeSeconds * 1000).toISOString(),
    };
  }
}

function source(minter: Minter, logger = capturedLogger().logger) {
  return new ScraperTokenSource({ store: minter, serviceAccount: SA, logger, now: () => minter.now });
}

describe('scraper ServiceAccount token (seed 001 "Bearer authentication")', () => {
  it('mints a 10-minute token for the scraper ServiceAccount with default audiences', async () => {
    const minter = new Minter();
    expect(await source(minter).bearer()).toEqual({ ok: true, token: 'eyJ.secret-token-1.sig' });
    expect(minter.requests).toEqual([{ ref: SA, options: { expirationSeconds: 600 } }]);
  });

  it('reuses the token until two thirds of its lifetime (400 s) has passed, then mints a new one', async () => {
    const minter = new Minter();
    const tokens = source(minter);
    await tokens.bearer();
    minter.now = 399_999;
    expect(await tokens.bearer()).toEqual({ ok: true, token: 'eyJ.secret-token-1.sig' });
    expect(minter.requests).toHaveLength(1);
    minter.now = 400_000;
    expect(await tokens.bearer()).toEqual({ ok: true, token: 'eyJ.secret-token-2.sig' });
    // The next renewal is two thirds into the new token's lifetime, measured from its mint.
    minter.now = 799_999;
    await tokens.bearer();
    expect(minter.requests).toHaveLength(2);
    minter.now = 800_000;
    await tokens.bearer();
    expect(minter.requests).toHaveLength(3);
  });

  it('follows a lifetime the API server shortened (renews at two thirds of what it granted)', async () => {
    const minter = new Minter();
    minter.lifetimeSeconds = 300;
    const tokens = source(minter);
    await tokens.bearer();
    minter.now = 199_999;
    await tokens.bearer();
    expect(minter.requests).toHaveLength(1);
    minter.now = 200_000;
    await tokens.bearer();
    expect(minter.requests).toHaveLength(2);
  });

  it('coalesces concurrent scrapes into one TokenRequest', async () => {
    const minter = new Minter();
    let open!: () => void;
    minter.gate = new Promise((resolve) => (open = resolve));
    const tokens = source(minter);
    const pending = Array.from({ length: 8 }, () => tokens.bearer());
    open();
    const results = await Promise.all(pending);
    expect(minter.requests).toHaveLength(1);
    expect(new Set(results.map((r) => (r.ok ? r.token : r.detail)))).toEqual(new Set(['eyJ.secret-token-1.sig']));
  });

  it('logs a failed mint at WARN only when the error changes, and never logs the token', async () => {
    const log = capturedLogger();
    const minter = new Minter();
    const tokens = source(minter, log.logger);
    minter.failWith = 'serviceaccounts "gossip-operator-metrics-scraper" is forbidden';
    for (let i = 0; i < 3; i += 1) {
      const result = await tokens.bearer();
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.detail).toContain('ServiceAccount grid-system/gossip-operator-metrics-scraper');
    }
    expect(log.warnings()).toHaveLength(1);
    minter.failWith = 'serviceaccounts "gossip-operator-metrics-scraper" not found';
    await tokens.bearer();
    await tokens.bearer();
    expect(log.warnings()).toHaveLength(2);
    minter.failWith = undefined;
    const ok = await tokens.bearer();
    expect(ok.ok).toBe(true);
    // A recovery followed by the first error again warns again: the error changed twice.
    minter.now = 400_000;
    minter.failWith = 'serviceaccounts "gossip-operator-metrics-scraper" is forbidden';
    await tokens.bearer();
    expect(log.warnings()).toHaveLength(3);
    expect(log.lines.join('\n')).not.toContain('secret-token');
  });

  it('keeps using a minted token until it really expires when a renewal fails, then reports the failure', async () => {
    const minter = new Minter();
    const tokens = source(minter);
    await tokens.bearer();
    minter.failWith = 'connection refused';
    minter.now = 450_000;
    expect(await tokens.bearer()).toEqual({ ok: true, token: 'eyJ.secret-token-1.sig' });
    minter.now = 600_000;
    const expired = await tokens.bearer();
    expect(expired.ok).toBe(false);
  });

  it('refuses an answer whose expiry is not in the future', async () => {
    const minter = new Minter();
    minter.lifetimeSeconds = 0;
    const result = await source(minter).bearer();
    expect(result).toMatchObject({ ok: false });
    if (!result.ok) expect(result.detail).toContain('expirationTimestamp');
  });
});

describe('metricsConfig.auth scrape through ProviderSignals (real HTTPS metrics server, real local store)', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setup(): Promise<{ store: LocalStore; https: TestServer; http: TestServer; caPem: string }> {
    const dir = await mkdtemp(join(tmpdir(), 'agn-scraper-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const store = await openLocalStore({ stateDir: dir, coalesceMs: 5, rescanIntervalMs: 60_000 });
    cleanups.push(() => store.close());
    const ca = await createCertificateAuthority();
    const leaf = await createServerCertificate(ca, { commonName: 'epp', sans: ['127.0.0.1'] });
    const page = (res: import('node:http').ServerResponse, auth: string | undefined) => {
      // Like an llm-d EPP behind TokenReview: no valid bearer, no metrics.
      if (auth === undefined || !auth.startsWith('Bearer eyJ.')) {
        res.writeHead(401).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain' }).end('llm_d_epp_average_queue_size{name="pool-a"} 0.25\n');
    };
    const httpsServer = await startServer((req, res) => page(res, req.headers.authorization), {
      cert: leaf.certPem,
      key: leaf.keyPem,
    });
    cleanups.push(() => httpsServer.close());
    const httpServer = await startServer((req, res) => page(res, req.headers.authorization));
    cleanups.push(() => httpServer.close());
    await store.apply(
      { apiVersion: 'v1', kind: 'ConfigMap', plural: 'configmaps', namespaced: true },
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'epp-ca', namespace: 'grid-system' },
        data: { 'ca.crt': ca.certPem },
      },
      { fieldManager: 'test' },
    );
    return { store, https: httpsServer, http: httpServer, caPem: ca.certPem };
  }

  function provider(endpoint: string, extra: Record<string, unknown> = {}, tls = true): InferenceProviderResource {
    return {
      apiVersion: 'grid.praxis.fast/v1alpha1',
      kind: 'InferenceProvider',
      metadata: { name: 'qwen3' },
      spec: {
        providerKind: 'vllm',
        endpoint,
        models: ['qwen3'],
        ...(tls ? { tls: { caConfigMapRef: { name: 'epp-ca', namespace: 'grid-system' } } } : {}),
        metricsConfig: {
          path: '/metrics',
          poolName: 'pool-a',
          signalNames: { queueDepth: 'llm_d_epp_average_queue_size' },
          auth: { type: 'serviceAccountToken' },
          ...extra,
        },
      },
    } as unknown as InferenceProviderResource;
  }

  it('sends the scraper token to the CA-proven endpoint and keeps it out of logs, status detail and metrics', async () => {
    const { store, https: server } = await setup();
    const log = capturedLogger();
    const minter = new Minter();
    const tokens = new ScraperTokenSource({
      store: minter,
      serviceAccount: SA,
      logger: log.logger,
      now: () => minter.now,
    });
    const signals = new ProviderSignals(() => tokens.bearer());
    const metrics = new OperatorMetrics({ defaultMetrics: false });
    const first = await signals.scrape(store, metrics, provider(server.url), 1_000);
    expect(signals.latest('qwen3')).toMatchObject({ result: 'success', failedClosed: false });
    expect(first.local?.sample?.queueDepth).toBe(0.25);
    await signals.scrape(store, metrics, provider(server.url), 2_000);
    expect(server.requests.map((r) => r.headers.authorization)).toEqual([
      'Bearer eyJ.secret-token-1.sig',
      'Bearer eyJ.secret-token-1.sig',
    ]);
    expect(minter.requests).toHaveLength(1);
    const exposed = `${await metrics.registry.metrics()}\n${JSON.stringify(signals.latest('qwen3'))}\n${log.lines.join('\n')}`;
    expect(exposed).not.toContain('secret-token');
  });

  it('refuses https without spec.tls or metricsConfig.tls, and http without allowPlaintext, before minting', async () => {
    const { store, https: server, http } = await setup();
    const minter = new Minter();
    const tokens = new ScraperTokenSource({
      store: minter,
      serviceAccount: SA,
      logger: capturedLogger().logger,
      now: () => minter.now,
    });
    const signals = new ProviderSignals(() => tokens.bearer());
    const metrics = new OperatorMetrics({ defaultMetrics: false });
    await signals.scrape(store, metrics, provider(server.url, {}, false), 0);
    expect(signals.latest('qwen3')).toMatchObject({ result: 'config' });
    expect(signals.latest('qwen3')?.detail).toContain('spec.tls or metricsConfig.tls');
    await signals.scrape(store, metrics, provider(http.url, {}, false), 0);
    expect(signals.latest('qwen3')?.detail).toContain('allowPlaintext');
    expect(minter.requests).toHaveLength(0);
    expect(server.requests).toHaveLength(0);
    expect(http.requests).toHaveLength(0);
    // metricsConfig.tls alone proves the host as well as spec.tls does.
    await signals.scrape(
      store,
      metrics,
      provider(server.url, { tls: { caConfigMapRef: { name: 'epp-ca', namespace: 'grid-system' } } }, false),
      0,
    );
    expect(signals.latest('qwen3')?.result).toBe('success');
    await signals.scrape(
      store,
      metrics,
      provider(http.url, { auth: { type: 'serviceAccountToken', allowPlaintext: true } }, false),
      0,
    );
    expect(signals.latest('qwen3')?.result).toBe('success');
    expect(http.requests[0]?.headers.authorization).toBe('Bearer eyJ.secret-token-1.sig');
  });

  it('fails closed with result auth when no token can be minted (the local store refuses TokenRequest)', async () => {
    const { store, https: server } = await setup();
    const tokens = new ScraperTokenSource({ store, serviceAccount: SA, logger: capturedLogger().logger, now: () => 0 });
    const signals = new ProviderSignals(() => tokens.bearer());
    await signals.scrape(store, new OperatorMetrics({ defaultMetrics: false }), provider(server.url), 0);
    expect(signals.latest('qwen3')).toMatchObject({ result: 'auth', failedClosed: true });
    expect(signals.latest('qwen3')?.detail).toContain('local store has no API server');
    expect(server.requests).toHaveLength(0);
  });
});
