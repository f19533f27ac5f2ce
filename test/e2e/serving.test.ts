/**
 * gridServing on the local grid (`agn up` runs the same compiled manifests): the example grid with east's consumer
 * gateway declared with gridServing and both operators serving their signals endpoint. East's operator renders the
 * serving ConfigMap, the serving overlay-sync pair delivers it, the gateway accepts exactly that revision, and polls
 * east's and west's signals endpoints over mTLS with the consumer certificate of the grid CA.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exampleGrid } from '../../constructs/example-grid.ts';
import { synthGrid } from '../../constructs/grid.ts';
import type { GridDeclaration } from '../../constructs/grid-declaration.ts';
import { CONFIG_MAP } from '../../daemons/shared/resource-store/index.ts';
import { type LocalGrid, startLocalGrid } from '../../daemons/local-grid/runner.ts';
import { waitFor } from '../../daemons/local-grid/traffic.ts';
import { validateServing, GATEWAY_MAX_SERVING_BYTES } from '../../schemas/serving/serving-config.ts';

const runDir = mkdtempSync(join(tmpdir(), 'agn-serving-'));
let grid: LocalGrid;

const declaration: GridDeclaration = {
  ...exampleGrid,
  sites: exampleGrid.sites.map((site) => ({
    ...site,
    peerSignals: { advertise: `gossip.${site.name}.grid.example.com:7950` },
    ...(site.consumerGateway === undefined
      ? {}
      : { consumerGateway: { ...site.consumerGateway, gridServing: { signalsPollIntervalMs: 500 } } }),
  })),
};

const metricsOf = async (admin: string): Promise<string> =>
  (await fetch(`http://${admin}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();

beforeAll(async () => {
  const distDir = join(runDir, 'dist');
  synthGrid(declaration, distDir);
  grid = await startLocalGrid({ distDir, stateDir: join(runDir, 'state'), profile: 'fast' });
}, 180_000);

afterAll(async () => {
  await grid?.stop();
  if (process.env['KEEP'] === undefined) rmSync(runDir, { recursive: true, force: true });
});

describe('gridServing on the local grid', () => {
  it("delivers east's serving config to its consumer gateways, which poll every site's signals endpoint", async () => {
    const store = grid.site('east').store;
    const configMap = await waitFor(
      "the serving ConfigMap in east's store",
      async () => {
        const cm = (await store.get(CONFIG_MAP, {
          name: 'grid-serving-demo-consumer-gateway',
          namespace: 'grid-system',
        })) as { data?: Record<string, string> } | undefined;
        const text = cm?.data?.['serving-config.json'];
        if (text === undefined) return undefined;
        const verdict = validateServing(text, {
          maxBytes: GATEWAY_MAX_SERVING_BYTES,
          expectedScope: { network: 'demo', gateway: 'consumer-gateway', local_site: 'east' },
        });
        // Wait until west's providers and both signals endpoints are in it (west joins a moment later).
        return verdict.ok &&
          verdict.document.serving.sites.every((s) => s.signals_address !== undefined) &&
          verdict.document.serving.entries.some((e) => e.site === 'west')
          ? verdict
          : undefined;
      },
      90_000,
    );
    const { document, revision } = configMap;
    expect(document.serving.sites.map((s) => s.site)).toEqual(['east', 'west']);
    expect(document.serving.entries.filter((e) => e.site === 'east').map((e) => e.provider)).toEqual([
      'east-llm-a',
      'east-llm-b',
    ]);

    const gateways = grid.byRole('consumer-gateway', 'east');
    expect(gateways).toHaveLength(2);
    for (const gateway of gateways) {
      const text = await waitFor(
        `${gateway.name} accepts revision ${revision} and polls both sites`,
        async () => {
          const metrics = await metricsOf(gateway.adminAddress!).catch(() => '');
          const accepted = metrics.includes(`grid_serving_config_accepted_revision{revision="${revision}"} 1`);
          const polled = ['east', 'west'].every((site) =>
            new RegExp(`grid_site_signals_polls_total\\{site="${site}",outcome="answered"\\} [1-9]`).test(metrics),
          );
          return accepted && polled ? metrics : undefined;
        },
        60_000,
      );
      expect(text).not.toMatch(/grid_site_signals_polls_total\{site="[a-z]+",outcome="no_address"\}/);
    }
  }, 180_000);
});
