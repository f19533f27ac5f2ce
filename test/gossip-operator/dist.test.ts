// The operator on the compiler's real output (dist/<site>.k8s.yaml from `npx cdk8s synth`): each InferenceProvider's
// endpoint is rewritten to a sim backend of its own on loopback (its models, its token), every other host:port the
// manifests name to a closed loopback port (this machine may only send traffic to loopback), the Secrets the local
// grid runner would create are generated, and the gateway's overlay must pass `agn overlay verify` with the full
// expected scope.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments, stringify } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { createCertificateAuthority, createClientCertificate } from '../../daemons/shared/tls.ts';
import { startSim, type SimServer } from '../../daemons/sim/server.ts';
import { REPO_ROOT } from '../fixtures-path.ts';
import {
  configMap,
  grid,
  schemaProblems,
  startLocalOperator,
  tempDir,
  testConfig,
  waitFor,
  type LocalOperator,
} from './helpers.ts';

const run = promisify(execFile);
const SITE_FILE = join(REPO_ROOT, 'dist/east.k8s.yaml');

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

describe.skipIf(!existsSync(SITE_FILE))('gossip-operator on dist/', () => {
  let op: LocalOperator | undefined;
  let dirs: { path: string; remove: () => Promise<void> } | undefined;
  const sims: SimServer[] = [];
  afterAll(async () => {
    await op?.stop();
    await Promise.all(sims.map((sim) => sim.close()));
    await dirs?.remove();
  });

  it('writes an overlay ConfigMap for the compiled site that agn overlay verify accepts', async () => {
    // A provider whose endpoint refused connections would be healthy only until its first probe, so whether the
    // overlay routed it depended on which came first (CI saw the wait time out); a live backend makes it stable.
    let text = await readFile(SITE_FILE, 'utf8');
    for (const provider of parseAllDocuments(text)
      .map((d) => d.toJS() as Json)
      .filter((d) => d?.kind === 'InferenceProvider')) {
      const sim = await startSim({
        name: provider.metadata.name,
        models: provider.spec.models.map((m: Json) => m.name),
        token: `token-of-${provider.metadata.name}`,
      });
      sims.push(sim);
      text = text.replaceAll(new URL(provider.spec.endpoint).host, `127.0.0.1:${sim.port}`);
    }
    text = text.replace(/\b[a-z0-9.-]+\.(example\.com|svc\.cluster\.local):\d+/g, '127.0.0.1:9');
    const docs = parseAllDocuments(text)
      .map((d) => d.toJS() as Json)
      .filter((d) => d !== null);
    const network = docs.find((d) => d.kind === 'GridNetwork');
    const gateway = network.spec.consumerGateways[0];
    const site: string = gateway.siteName;
    const refs = new Map<string, { namespace: string; name: string; keys: Record<string, string> }>();
    const ca = await createCertificateAuthority({ commonName: 'dist test ca' });
    const identity = await createClientCertificate(ca, { commonName: site });
    const tls = network.spec.tls ?? {};
    const add = (ref: { name: string; namespace: string } | undefined, keys: Record<string, string>) => {
      if (ref !== undefined)
        refs.set(`${ref.namespace}/${ref.name}`, {
          ...ref,
          keys: { ...refs.get(`${ref.namespace}/${ref.name}`)?.keys, ...keys },
        });
    };
    add(tls.caSecretRef, { 'ca.crt': ca.certPem });
    add(tls.siteSecretRef, { 'tls.crt': identity.certPem, 'tls.key': identity.keyPem, 'ca.crt': ca.certPem });
    add(tls.swimKeySecretRef, { key: randomBytes(32).toString('latin1') });
    for (const d of docs)
      if (d.spec?.auth?.secretRef !== undefined)
        add(d.spec.auth.secretRef, { [d.spec.auth.secretRef.key ?? 'token']: `token-of-${d.metadata.name}` });
    const secrets = [...refs.values()].map((r) => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: r.name, namespace: r.namespace },
      data: Object.fromEntries(
        Object.entries(r.keys).map(([k, v]) => [k, Buffer.from(v, k === 'key' ? 'latin1' : 'utf8').toString('base64')]),
      ),
    }));
    dirs = await tempDir('operator-dist');
    const manifests = join(dirs.path, 'manifests');
    const state = join(dirs.path, 'state');
    await mkdir(manifests, { recursive: true });
    await writeFile(join(manifests, 'site.yaml'), text);
    await writeFile(join(manifests, 'secrets.yaml'), secrets.map((s) => stringify(s)).join('---\n'));
    op = await startLocalOperator(testConfig({ site, store: { backend: 'local', stateDir: state } }), {
      stateDir: state,
      manifestsDir: manifests,
    });

    const name = `grid-overlay-${network.metadata.name}-${gateway.name}`;
    // Each provider is probed and scraped (its sim answered), so what follows is the overlay of healthy providers,
    // not one rendered before the first probe.
    const providers = docs.filter((d) => d.kind === 'InferenceProvider');
    for (const provider of providers) {
      await waitFor(
        `InferenceProvider ${provider.metadata.name} Ready after a scrape`,
        async () => {
          const ready = (
            (await grid(state, 'InferenceProvider', provider.metadata.name))?.status?.conditions as Json[] | undefined
          )?.find((c) => c.type === 'Ready');
          return ready?.status === 'True' && ready.reason === 'MetricsScraped' ? ready : undefined;
        },
        20_000,
      );
    }
    // The compiled site's own models are routed (selection_policy as the GridNetwork sets it). An overlay published
    // earlier in start-up may route fewer (CI saw one without a model of the site), so the wait is for the overlay
    // that routes them all, and the run fails if none does within the bound.
    const models = providers.flatMap((d) => d.spec.models.map((m: Json) => m.name));
    const routesAll = (cm: Json): boolean => {
      const candidates = (JSON.parse(cm.data['routing-overlay.json']) as Json).overlay.candidates as Json[];
      return models.every((model: string) => candidates.some((c: Json) => c.name === model && c.site === site));
    };
    const cm: Json = await waitFor(
      `ConfigMap ${gateway.namespace}/${name} routing every model of ${site}`,
      async () => {
        const found = await configMap(state, gateway.namespace, name);
        return found !== undefined && routesAll(found) ? found : undefined;
      },
      20_000,
    );
    const file = join(dirs.path, 'routing-overlay.json');
    await writeFile(file, cm.data['routing-overlay.json']);
    const args = [
      'overlay',
      'verify',
      file,
      '--network',
      network.metadata.name,
      '--gateway',
      gateway.name,
      '--namespace',
      gateway.namespace,
      '--local-site',
      site,
    ];
    const verified = await run(process.execPath, [join(REPO_ROOT, 'daemons/cli/agn.ts'), ...args], { cwd: REPO_ROOT });
    expect(verified.stdout).toMatch(/^accept [0-9a-f]{64}\n$/);
    const overlay = JSON.parse(cm.data['routing-overlay.json']);
    for (const model of models)
      expect(overlay.overlay.candidates.some((c: Json) => c.name === model && c.site === site)).toBe(true);
    if (network.spec.selectionPolicy !== undefined)
      expect(overlay.overlay.selection_policy).toEqual({ mode: network.spec.selectionPolicy.mode });
    // Peers are declared but unpinned and unreachable here: never Active, never routed.
    expect(overlay.overlay.candidates.every((c: Json) => c.site === site)).toBe(true);
    for (const d of docs.filter((x) => x.kind === 'GridSite' && x.metadata.name !== site)) {
      const gs: Json = await waitFor(`GridSite ${d.metadata.name} status`, async () =>
        (await grid(state, 'GridSite', d.metadata.name))?.status?.phase
          ? grid(state, 'GridSite', d.metadata.name)
          : undefined,
      );
      expect(gs.status.phase).not.toBe('Active');
    }
    for (const line of op.lines) expect(line).not.toMatch(/token-of-/);
    expect(JSON.stringify(cm)).not.toMatch(/token-of-/);
    expect(await schemaProblems(state)).toEqual([]);
  });
});
