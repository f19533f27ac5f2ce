// The gateway process wiring of a serving config (startGateway with the options GRID_SERVING_CONFIG gives): the
// SiteView is built and exposed, /readyz stays 503 until a valid serving config is accepted (like the overlay), the
// serving metrics are on the admin /metrics, and close() stops the poller.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startGateway, type GatewayInstance } from '../../../daemons/gateway/server.ts';
import { resolveConfig } from '../../../daemons/gateway/config.ts';
import { buildServingDocument, serializeServing } from '../../../schemas/serving/serving-config.ts';
import { capturingLogger } from '../../gossip-operator/helpers.ts';
import { candidate, consumerConfig, payload, tempDir, waitFor, writeOverlay, writeRaw } from '../helpers.ts';

describe('gateway with a serving config', () => {
  let gateway: GatewayInstance | undefined;
  let cleanup: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await gateway?.close();
    await cleanup?.();
  });

  it('builds the SiteView, is ready only once the serving config is accepted, and exposes its metrics', async () => {
    const dirs = await tempDir('gateway-serving');
    cleanup = dirs.cleanup;
    const overlayPath = join(dirs.dir, 'overlay', 'routing-overlay.json');
    const servingPath = join(dirs.dir, 'serving', 'serving-config.json');
    await mkdir(join(dirs.dir, 'overlay'));
    await mkdir(join(dirs.dir, 'serving'));
    await writeOverlay(overlayPath, payload([candidate('m1', 'west', 'llm-a')]));
    const config = consumerConfig({ overlayPath, clusters: [{ name: 'llm-a', endpoints: ['127.0.0.1:9'] }] });
    gateway = await startGateway(resolveConfig(config, 'consumer.json'), {
      configDir: dirs.dir,
      logger: capturingLogger().logger,
      processMetrics: false,
      overlayPollIntervalMs: 0,
      serving: {
        file: servingPath,
        tls: {
          caFile: join(dirs.dir, 'none', 'ca.crt'),
          certFile: join(dirs.dir, 'none', 'tls.crt'),
          keyFile: join(dirs.dir, 'none', 'tls.key'),
        },
        filePollIntervalMs: 50,
      },
    });
    const admin = `http://127.0.0.1:${gateway.adminPort}`;
    expect(gateway.siteView).toBeDefined();
    expect(gateway.isReady()).toBe(false);
    expect((await fetch(`${admin}/readyz`)).status).toBe(503);

    const document = buildServingDocument(
      { gateway: 'edge', namespace: 'grid-system' },
      {
        network: 'grid',
        local_site: 'west',
        sites: [{ site: 'west' }],
        entries: [{ site: 'west', provider: 'llm-a', models: ['m1'], cluster: 'llm-a', admission: 'all', ready: true }],
      },
      '2026-12-01T00:00:00Z',
    );
    await writeRaw(servingPath, serializeServing(document));
    await waitFor('the serving config accepted', () =>
      gateway!.siteView!.revision() === document.revision.value ? true : undefined,
    );
    expect(gateway.isReady()).toBe(true);
    expect((await fetch(`${admin}/readyz`)).status).toBe(200);
    expect(gateway.siteView!.entries('m1')).toEqual([
      { site: 'west', provider: 'llm-a', models: ['m1'], cluster: 'llm-a', admission: 'all', ready: true, local: true },
    ]);
    const metrics = await (await fetch(`${admin}/metrics`)).text();
    expect(metrics).toContain(`grid_serving_config_accepted_revision{revision="${document.revision.value}"} 1`);
  });

  it("without serving options there is no SiteView and readiness is the overlay's alone", async () => {
    const dirs = await tempDir('gateway-no-serving');
    cleanup = dirs.cleanup;
    const overlayPath = join(dirs.dir, 'routing-overlay.json');
    await writeOverlay(overlayPath, payload([candidate('m1', 'west', 'llm-a')]));
    gateway = await startGateway(
      resolveConfig(
        consumerConfig({ overlayPath, clusters: [{ name: 'llm-a', endpoints: ['127.0.0.1:9'] }] }),
        'consumer.json',
      ),
      {
        configDir: dirs.dir,
        logger: capturingLogger().logger,
        processMetrics: false,
        overlayPollIntervalMs: 0,
      },
    );
    expect(gateway.siteView).toBeUndefined();
    expect(gateway.isReady()).toBe(true);
    expect(await (await fetch(`http://127.0.0.1:${gateway.adminPort}/metrics`)).text()).not.toContain(
      'grid_serving_config',
    );
  });
});
