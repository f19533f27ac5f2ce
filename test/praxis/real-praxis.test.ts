// The real Praxis parser on our configs: test/praxis/praxis-check (praxis-proxy 0.5.3's `--validate` path,
// built by build-praxis-check.sh) runs over every praxis.yaml in dist/, every pod-local config the local grid writes
// from them, the operator's generated consumer config, and each row of the conformance table whose rule the published
// Praxis crates enforce. Praxis AI's own filters are stand-ins in the checker (see its src/main.rs), so their rows
// stay with test/conformance/praxis-config.test.ts. Run with `npm run test:praxis`.
import { execFile } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { buildAddressTable } from '../../daemons/local-grid/address-table.ts';
import { configMapData, loadCompiledGrid } from '../../daemons/local-grid/compiled-grid.ts';
import { rewriteGatewayConfig } from '../../daemons/local-grid/rewrite.ts';
import {
  consumer,
  dir,
  FAKE,
  generatedConsumerConfig,
  provider,
  RULES,
  type Json,
} from '../conformance/praxis-rules-table.ts';
import { AGENT_FILTERS, TENANT_FILTERS } from '../../constructs/consumer-gateway-config.ts';
import { AGENT_PROVIDER_FILTER } from '../../constructs/provider-gateway-config.ts';
import { REPO_ROOT } from '../fixtures-path.ts';

const run = promisify(execFile);
const checker = process.env.AGN_PRAXIS_CHECK;
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Files to check, by what they are; each is written below and checked in one run of the checker. */
const compiled: string[] = [];
/**
 * Compiled configs that carry whole-filter extensions our gateway declares (x-agn-extension in the schema): the
 * caller-key filters of a consumer with callerKeys, the agent routes of a site with tool servers or agents. The
 * file, the first such filter in chain order, and the same config with those filters removed.
 */
const withExtensionFilters: { file: string; first: string; stripped: string }[] = [];
const examples = new Map<string, string>();
const verdicts = new Map<string, string>();

function write(name: string, text: string): string {
  const path = join(dir, name);
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, text);
  return path;
}

const EXTENSION_FILTERS: readonly string[] = [...TENANT_FILTERS, ...AGENT_FILTERS, AGENT_PROVIDER_FILTER];
const isExtensionFilter = (f: Json): boolean => EXTENSION_FILTERS.includes(f.filter);

/** Writes a compiled config; one with extension filters is also written without them. */
function writeCompiled(name: string, text: string): void {
  const file = write(name, text);
  compiled.push(file);
  const doc = parseYaml(text) as Json;
  const extensions = (doc.filter_chains as Json[]).flatMap((chain) =>
    (chain.filters as Json[]).filter(isExtensionFilter),
  );
  if (extensions.length === 0) return;
  for (const chain of doc.filter_chains as Json[])
    chain.filters = (chain.filters as Json[]).filter((f) => !isExtensionFilter(f));
  withExtensionFilters.push({
    file,
    first: extensions[0].filter,
    stripped: write(name.replace(/\.yaml$/u, '.without-extension-filters.yaml'), stringifyYaml(doc)),
  });
}

beforeAll(async () => {
  if (checker === undefined) throw new Error('AGN_PRAXIS_CHECK is not set: run this suite with `npm run test:praxis`');
  const sites = loadCompiledGrid(join(REPO_ROOT, 'dist'));
  // dist/: the praxis.yaml text of each ConfigMap, byte for byte as a pod mounts it.
  for (const site of sites) {
    for (const o of site.objects as unknown as Json[]) {
      if (o.kind === 'ConfigMap' && typeof o.data?.['praxis.yaml'] === 'string') {
        writeCompiled(`dist/${site.site}/${o.metadata.name}.yaml`, o.data['praxis.yaml']);
      }
    }
  }
  // The local grid: what the runner writes for each gateway pod (rewritten addresses and mount paths).
  let next = 30000;
  const table = await buildAddressTable(sites, { tcp: async () => next++, gossip: async () => next++ });
  for (const site of sites) {
    for (const pod of site.pods.filter((p) => p.deployment.endsWith('-gateway'))) {
      const doc = parseYaml(configMapData(site, pod.namespace, `${pod.deployment}-config`)!['praxis.yaml']!) as Record<
        string,
        unknown
      >;
      const problems: string[] = [];
      const mounts = [
        { mountPath: '/run/praxis-routing', dir: join(dir, site.site, pod.id, 'overlay') },
        { mountPath: '/etc/praxis', dir: join(dir, site.site, pod.id, 'praxis') },
      ];
      const local = rewriteGatewayConfig(doc, { site: site.site, table, pod, mounts, problems });
      // The example's tool server and agent are in-cluster Services the compiled grid names but does not run.
      expect(problems.filter((p) => !/ endpoint \S+\.svc\.cluster\.local:\d+ is served by nothing/.test(p))).toEqual(
        [],
      );
      writeCompiled(`local/${site.site}/${pod.id}.yaml`, stringifyYaml(local));
    }
  }
  // The operator's generated consumer config (GatewayConsumer praxis.generate).
  writeCompiled('generated/consumer.yaml', generatedConsumerConfig());
  // The table: each row's accepted and refused example.
  examples.set('base provider', write('table/base-provider.yaml', stringifyYaml(provider(FAKE))));
  examples.set('base consumer', write('table/base-consumer.yaml', stringifyYaml(consumer())));
  RULES.forEach((r, i) => {
    const accepted = r.base();
    r.accept(accepted);
    examples.set(`accept ${r.rule}`, write(`table/${i}-accepted.yaml`, stringifyYaml(accepted)));
    const refused = r.base();
    r.refuse(refused);
    examples.set(`refuse ${r.rule}`, write(`table/${i}-refused.yaml`, stringifyYaml(refused)));
  });

  const files = [...compiled, ...withExtensionFilters.map((w) => w.stripped), ...examples.values()];
  // Exit 1 means "some file was rejected": the verdicts are asserted one by one below.
  const { stdout } = await run(checker, files, { timeout: 60_000 }).catch(
    (error: { code?: number; stdout?: string; stderr?: string }) => {
      if (error.code !== 1) throw new Error(`praxis-check failed (exit ${error.code}): ${error.stderr}`);
      return { stdout: error.stdout ?? '' };
    },
  );
  for (const line of stdout.split('\n').filter((l) => l !== '')) {
    const match = /^(accept|reject) (\S+?)(?::|$)/.exec(line);
    if (match === null) throw new Error(`praxis-check printed an unexpected line: ${line}`);
    verdicts.set(match[2]!, line);
  }
  expect([...verdicts.keys()].sort()).toEqual([...files].sort());
}, 120_000);

const verdict = (file: string): string => verdicts.get(file) ?? `no verdict for ${file}`;

describe('real Praxis (praxis-proxy 0.5.3 --validate) on what we compile', () => {
  it('accepts every praxis.yaml in dist/, every pod-local config of the local grid and the generated consumer config', () => {
    expect(compiled.filter((f) => f.includes('/dist/'))).toHaveLength(3);
    expect(compiled.filter((f) => f.includes('/local/'))).toHaveLength(6);
    const extended = new Set(withExtensionFilters.map((w) => w.file));
    for (const file of compiled.filter((f) => !extended.has(f))) expect(verdict(file)).toBe(`accept ${file}`);
  });

  it('refuses only the extension filters of the gateways that declare them, and accepts those configs without them', () => {
    // The example's east consumer declares callerKeys (docs/tenants.md): a Praxis AI consumer
    // cannot run caller_auth, usage_meter or budget_enforce, so such a consumer must be our gateway. Both sites
    // offer a tool server or an agent (docs/agents.md): their provider gateways run
    // agent_provider_route, east's consumer mcp_route and a2a_route.
    expect(withExtensionFilters.map((w) => w.file.slice(dir.length + 1)).sort()).toEqual([
      'dist/east/consumer-gateway-config.yaml',
      'dist/east/provider-gateway-config.yaml',
      'dist/west/provider-gateway-config.yaml',
      'local/east/consumer-gateway-0.yaml',
      'local/east/consumer-gateway-1.yaml',
      'local/east/provider-gateway-0.yaml',
      'local/east/provider-gateway-1.yaml',
      'local/west/provider-gateway-0.yaml',
      'local/west/provider-gateway-1.yaml',
    ]);
    for (const { file, first, stripped } of withExtensionFilters) {
      expect(verdict(file)).toBe(`reject ${file}: unknown filter type: '${first}'`);
      expect(verdict(stripped)).toBe(`accept ${stripped}`);
    }
  });

  it('accepts the table base configs and every accepted example', () => {
    for (const [name, file] of examples)
      if (!name.startsWith('refuse ')) expect(verdict(file), name).toBe(`accept ${file}`);
  });
});

describe('real Praxis on the refused examples of the conformance table', () => {
  const core = RULES.filter((r) => r.praxis !== 'ai');
  it.each(core.map((r) => [r.rule, r] as const))('%s', (_name, r) => {
    const file = examples.get(`refuse ${r.rule}`)!;
    if (r.praxis === 'accepts') expect(verdict(file)).toBe(`accept ${file}`);
    else {
      expect(verdict(file)).toMatch(new RegExp(`^reject ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: `));
      expect(verdict(file)).toMatch(r.praxis);
    }
  });
});
