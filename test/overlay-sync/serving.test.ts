// overlay-sync delivering a gateway's serving config (OVERLAY_SYNC_CONTRACT=serving) on the local store, with the
// overlay's rules: a valid config is written byte for byte, a bad or foreign one never replaces it (degraded but
// ready, the reason named), an unchanged revision is not rewritten, and a valid file on disk is restored at start.
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../daemons/overlay-sync/config.ts';
import { CONFIG_MAP, openLocalStore, type LocalStore } from '../../daemons/shared/resource-store/index.ts';
import type { ServingPayload } from '../../schemas/generated/serving-config.ts';
import { buildServingDocument, serializeServing } from '../../schemas/serving/serving-config.ts';
import {
  configMapObject,
  daemonConfig,
  makeTempDir,
  metricValue,
  NAMESPACE,
  poll,
  processed,
  startTestDaemon,
  type TestDaemon,
} from './helpers.ts';

const NAME = 'grid-serving-grid-edge';
const KEY = 'serving-config.json';
const SCOPE = { network: 'grid', gateway: 'edge', namespace: NAMESPACE, local_site: 'west' };

function servingText(models: string[], over: { network?: string; gateway?: string } = {}): string {
  const serving: ServingPayload = {
    network: over.network ?? 'grid',
    local_site: 'west',
    sites: [{ site: 'west', signals_address: '127.0.0.1:7443' }],
    entries: [{ site: 'west', provider: 'llm-a', models, cluster: 'llm-a', admission: 'all', ready: true }],
  };
  return serializeServing(
    buildServingDocument({ gateway: over.gateway ?? 'edge', namespace: NAMESPACE }, serving, '2026-12-01T10:00:00Z'),
  );
}

describe('overlay-sync delivering the serving config', () => {
  let dir: Awaited<ReturnType<typeof makeTempDir>>;
  let operator: LocalStore;
  let daemon: TestDaemon | undefined;
  let output: string;
  let stateDir: string;
  const config = () =>
    daemonConfig(stateDir, output, { contract: 'serving', configMap: NAME, dataKey: KEY, expectedScope: SCOPE });
  const publish = async (text: string) =>
    (
      await operator.apply(CONFIG_MAP, configMapObject({ [KEY]: text }, NAME), {
        fieldManager: 'grid-operator',
        force: true,
      })
    ).metadata.resourceVersion ?? '';

  beforeEach(async () => {
    dir = await makeTempDir('sync-serving');
    stateDir = join(dir.path, 'state');
    output = join(dir.path, 'run', KEY);
    operator = await openLocalStore({ stateDir });
  });
  afterEach(async () => {
    await daemon?.close();
    daemon = undefined;
    await operator.close();
    await dir.remove();
  });

  it('writes a valid serving config and keeps it through bad and foreign replacements', async () => {
    daemon = await startTestDaemon(config());
    expect(await daemon.readyz()).toBe(503);
    const good = servingText(['m1']);
    await processed(daemon, await publish(good));
    expect(await readFile(output, 'utf8')).toBe(good);
    expect(await daemon.readyz()).toBe(200);

    const tampered = JSON.parse(good);
    tampered.serving.entries[0].admission = 'none';
    for (const [text, reason] of [
      [JSON.stringify(tampered), 'digest_mismatch'],
      [servingText(['m1'], { gateway: 'other-edge' }), 'scope_mismatch'],
      ['{"schema_version":"1.0"', 'malformed'],
      // The overlay is not a serving config.
      [JSON.stringify({ network: 'grid', local_site: 'west', candidates: [] }), 'malformed'],
    ] as const) {
      const status = await processed(daemon, await publish(text));
      expect(status['state']).toBe('ready_degraded');
      expect(status['degraded_reason']).toBe(reason);
      expect(await readFile(output, 'utf8')).toBe(good);
    }
    expect(
      metricValue(await daemon.metrics(), 'grid_overlay_sync_validation_failures_total', { reason: 'digest_mismatch' }),
    ).toBe(1);
    expect(daemon.logLines.some((l) => l.includes('"contract":"serving"'))).toBe(true);

    const next = servingText(['m1', 'm2']);
    await processed(daemon, await publish(next));
    expect(await readFile(output, 'utf8')).toBe(next);
    const written = (await stat(output)).mtimeMs;
    // The same revision again: no write.
    const again = await processed(daemon, await publish(next));
    expect(again['state']).toBe('ready');
    expect((await stat(output)).mtimeMs).toBe(written);
  });

  it('restores a valid serving config file at start and stays cold on an invalid one', async () => {
    daemon = await startTestDaemon(config());
    const good = servingText(['m1']);
    await processed(daemon, await publish(good));
    await daemon.close();
    await operator.delete(CONFIG_MAP, { name: NAME, namespace: NAMESPACE });
    daemon = await startTestDaemon(config());
    const status = await poll(
      () => daemon!.status(),
      (s) => s['written']?.['revision'] !== undefined,
      'restore',
    );
    expect(status['written']['source']).toBe('restored');
    expect(await daemon.readyz()).toBe(200);
  });

  it('derives the serving ConfigMap, data key and output from the contract', () => {
    const parsed = parseConfig([], {
      OVERLAY_SYNC_CONTRACT: 'serving',
      OVERLAY_SYNC_EXPECTED_NETWORK: 'grid',
      OVERLAY_SYNC_EXPECTED_GATEWAY: 'edge',
      OVERLAY_SYNC_EXPECTED_NAMESPACE: NAMESPACE,
    });
    expect(parsed).toMatchObject({
      contract: 'serving',
      configMap: NAME,
      dataKey: KEY,
      output: '/run/grid-serving/serving-config.json',
    });
    expect(
      parseConfig([], {
        OVERLAY_SYNC_EXPECTED_NETWORK: 'grid',
        OVERLAY_SYNC_EXPECTED_GATEWAY: 'edge',
        OVERLAY_SYNC_EXPECTED_NAMESPACE: NAMESPACE,
      }),
    ).toMatchObject({
      contract: 'overlay',
      configMap: 'grid-overlay-grid-edge',
      dataKey: 'routing-overlay.json',
      output: '/run/praxis-routing/routing-overlay.json',
    });
    expect(() =>
      parseConfig([], {
        OVERLAY_SYNC_CONTRACT: 'routing',
        OVERLAY_SYNC_NAMESPACE: NAMESPACE,
        OVERLAY_SYNC_CONFIGMAP: NAME,
      }),
    ).toThrow('OVERLAY_SYNC_CONTRACT: "routing" is not a contract; use overlay or serving');
  });
});
