// overlay-sync behaviour a gateway relies on, end to end on the local store: last-known-good under bad
// updates, no rewrite for an unchanged revision, degraded-but-ready when the ConfigMap or key goes away,
// restore at start, and readiness that turns on exactly when a valid file exists.

import { readFile, stat, writeFile, mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CONFIG_MAP, openLocalStore, type LocalStore } from '../../daemons/shared/resource-store/index.ts';
import { validateOverlay } from '../../schemas/overlay/validate.ts';
import {
  CONFIGMAP,
  configMapObject,
  daemonConfig,
  fixtureText,
  makeTempDir,
  metricValue,
  NAMESPACE,
  poll,
  processed,
  publish,
  startTestDaemon,
  type TestDaemon,
} from './helpers.ts';

const VALID = 'valid-multi-candidate.json';
const VALID_REVISION = '75b057d750d9db77030ecd5a073c235c56b2b0460d3d517340b3e44020e83056';
const REJECTS: [string, string][] = [
  ['invalid-digest.json', 'digest_mismatch'],
  ['legacy-payload.json', 'malformed'],
  ['local-site-scope-mismatch.json', 'scope_mismatch'],
  ['network-scope-mismatch.json', 'scope_mismatch'],
  ['revision-digest-disagreement.json', 'revision_digest_mismatch'],
  ['unsupported-schema-version.json', 'unsupported_schema'],
  ['malformed-envelope.json', 'malformed'],
  ['hybrid-missing-schema.json', 'malformed'],
];

describe('overlay-sync daemon', () => {
  let dir: Awaited<ReturnType<typeof makeTempDir>>;
  let operator: LocalStore;
  let daemon: TestDaemon | undefined;
  let output: string;
  let stateDir: string;

  beforeEach(async () => {
    dir = await makeTempDir('sync-daemon');
    stateDir = join(dir.path, 'state');
    output = join(dir.path, 'run', 'routing-overlay.json');
    operator = await openLocalStore({ stateDir });
  });
  afterEach(async () => {
    await daemon?.close();
    daemon = undefined;
    await operator.close();
    await dir.remove();
  });

  it('keeps the previous file byte-identical through every rejected update, degraded but ready', async () => {
    daemon = await startTestDaemon(daemonConfig(stateDir, output));
    const valid = await fixtureText(VALID);
    await processed(daemon, await publish(operator, valid));
    const before = await stat(output);

    for (const [name, reason] of [...REJECTS, ['not json at all', 'malformed'] as [string, string]]) {
      const text = name.endsWith('.json') ? await fixtureText(name) : name;
      const status = await processed(daemon, await publish(operator, text));
      expect(status['state'], name).toBe('ready_degraded');
      expect(status['degraded_reason'], name).toBe(reason);
      expect(status['written']['revision']).toBe(VALID_REVISION);
      expect(await readFile(output, 'utf8'), name).toBe(valid);
      expect(await daemon.readyz()).toBe(200);
    }
    expect((await stat(output)).ino).toBe(before.ino);
    const metrics = await daemon.metrics();
    expect(metricValue(metrics, 'grid_overlay_sync_degraded')).toBe(1);
    expect(metricValue(metrics, 'grid_overlay_sync_validation_failures_total', { reason: 'malformed' })).toBe(4);
    expect(metricValue(metrics, 'grid_overlay_sync_validation_failures_total', { reason: 'scope_mismatch' })).toBe(2);
    expect(metricValue(metrics, 'grid_overlay_sync_file_writes_total', { outcome: 'success' })).toBe(1);

    // A valid update afterwards clears the degraded state.
    const minimal = await fixtureText('valid-minimal.json');
    const status = await processed(daemon, await publish(operator, minimal));
    expect(status['state']).toBe('ready');
    expect(status['degraded_reason']).toBeNull();
    expect(await readFile(output, 'utf8')).toBe(minimal);
    expect(metricValue(await daemon.metrics(), 'grid_overlay_sync_degraded')).toBe(0);
  });

  it('does not rewrite the file when only the timestamp changed (same revision)', async () => {
    daemon = await startTestDaemon(daemonConfig(stateDir, output));
    const valid = await fixtureText(VALID);
    await processed(daemon, await publish(operator, valid));
    const before = await stat(output);
    for (const name of ['timestamp-change-same-revision.json', 'unknown-additive-field.json']) {
      const status = await processed(daemon, await publish(operator, await fixtureText(name)));
      expect(status['observed']['outcome']).toBe('unchanged');
      expect(status['observed']['revision']).toBe(VALID_REVISION);
      expect(status['state']).toBe('ready');
    }
    const after = await stat(output);
    expect(after.ino).toBe(before.ino);
    expect(after.mtimeMs).toBe(before.mtimeMs);
    expect(await readFile(output, 'utf8')).toBe(valid);
    const metrics = await daemon.metrics();
    expect(
      metricValue(metrics, 'grid_overlay_sync_events_total', { outcome: 'unchanged', reason: 'same_revision' }),
    ).toBe(2);
    expect(metricValue(metrics, 'grid_overlay_sync_file_writes_total', { outcome: 'success' })).toBe(1);
  });

  it('keeps the file and reports degraded when the data key or the ConfigMap disappears', async () => {
    daemon = await startTestDaemon(daemonConfig(stateDir, output));
    const valid = await fixtureText(VALID);
    await processed(daemon, await publish(operator, valid));

    // Apply replaces top-level fields, so this drops the overlay key from data.
    const rv = (
      await operator.apply(CONFIG_MAP, configMapObject({ 'routing-config.json': '{}' }), { fieldManager: 'test' })
    ).metadata.resourceVersion!;
    let status = await processed(daemon, rv);
    expect(status['degraded_reason']).toBe('data_key_missing');
    expect(status['state']).toBe('ready_degraded');
    expect(await readFile(output, 'utf8')).toBe(valid);

    await operator.delete(CONFIG_MAP, { namespace: NAMESPACE, name: CONFIGMAP });
    status = await poll(
      () => daemon!.status(),
      (s) => s['degraded_reason'] === 'configmap_deleted',
      'configmap_deleted',
    );
    expect(status['state']).toBe('ready_degraded');
    expect(await readFile(output, 'utf8')).toBe(valid);
    expect(await daemon.readyz()).toBe(200);
    const metrics = await daemon.metrics();
    expect(
      metricValue(metrics, 'grid_overlay_sync_events_total', { outcome: 'missing', reason: 'configmap_deleted' }),
    ).toBe(1);
    expect(
      metricValue(metrics, 'grid_overlay_sync_events_total', { outcome: 'missing', reason: 'data_key_missing' }),
    ).toBe(1);
  });

  it('restores a valid existing file as last-known-good before any ConfigMap exists', async () => {
    const valid = await fixtureText(VALID);
    await mkdir(join(dir.path, 'run'), { recursive: true });
    await writeFile(output, valid);
    // A temp file left by a writer killed between write and rename is cleaned up.
    await writeFile(join(dir.path, 'run', '.routing-overlay.json.tmp-999999-deadbeef'), valid.slice(0, 100));
    daemon = await startTestDaemon(daemonConfig(stateDir, output));
    expect(await daemon.readyz()).toBe(200);
    const status = await poll(
      () => daemon!.status(),
      (s) => s['degraded_reason'] === 'configmap_absent',
      'initial sync without ConfigMap',
    );
    expect(status['state']).toBe('ready_degraded');
    expect(status['written']).toMatchObject({ revision: VALID_REVISION, source: 'restored' });
    expect(await readdir(join(dir.path, 'run'))).toEqual(['routing-overlay.json']);
    expect(metricValue(await daemon.metrics(), 'grid_overlay_sync_last_write_timestamp_seconds')).toBeGreaterThan(0);

    // The ConfigMap then arrives with the same revision: ready, and the restored file is not rewritten.
    const before = await stat(output);
    const after = await processed(
      daemon,
      await publish(operator, await fixtureText('timestamp-change-same-revision.json')),
    );
    expect(after['state']).toBe('ready');
    expect((await stat(output)).mtimeMs).toBe(before.mtimeMs);
  });

  it('starts cold when the existing file is invalid, and does not serve it as ready', async () => {
    await mkdir(join(dir.path, 'run'), { recursive: true });
    await writeFile(output, await fixtureText('invalid-digest.json'));
    daemon = await startTestDaemon(daemonConfig(stateDir, output));
    await poll(
      () => daemon!.status(),
      (s) => s['degraded_reason'] === 'configmap_absent',
      'initial sync',
    );
    expect(await daemon.readyz()).toBe(503);
    expect(metricValue(await daemon.metrics(), 'grid_overlay_sync_ready')).toBe(0);
  });

  it('turns ready exactly when the first valid file exists', async () => {
    daemon = await startTestDaemon(daemonConfig(stateDir, output));
    const samples: { ready: number; fileValid: boolean }[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const ready = await daemon!.readyz();
        let fileValid = false;
        try {
          fileValid = validateOverlay(await readFile(output), { maxBytes: 1 << 20, allowLegacy: false }).ok;
        } catch {
          fileValid = false;
        }
        samples.push({ ready, fileValid });
      }
    })();
    try {
      await processed(daemon, await publish(operator, await fixtureText('invalid-digest.json')));
      expect(await daemon.readyz()).toBe(503);
      await processed(daemon, await publish(operator, await fixtureText(VALID)));
      await poll(
        () => samples.length,
        (n) => n > 0 && samples[n - 1]!.ready === 200,
        'a ready sample',
      );
    } finally {
      sampling = false;
      await sampler;
    }
    // Ready implies a valid file (the file is read after the probe answered).
    expect(samples.filter((s) => s.ready === 200 && !s.fileValid)).toEqual([]);
    // Not ready until then, never ready-then-unready.
    const firstReady = samples.findIndex((s) => s.ready === 200);
    expect(firstReady).toBeGreaterThan(0);
    expect(samples.slice(0, firstReady).every((s) => s.ready === 503)).toBe(true);
    expect(samples.slice(firstReady).every((s) => s.ready === 200)).toBe(true);
  });

  it('enforces the configured expected scope and the size limit', async () => {
    daemon = await startTestDaemon(
      daemonConfig(stateDir, output, {
        expectedScope: {
          network: 'glb-demo',
          gateway: 'glb-demo-edge-gateway',
          namespace: 'grid-system',
          local_site: 'east-edge',
        },
      }),
    );
    let status = await processed(daemon, await publish(operator, await fixtureText('valid-minimal.json')));
    expect(status['degraded_reason']).toBe('scope_mismatch');
    status = await processed(daemon, await publish(operator, await fixtureText(VALID)));
    expect(status['state']).toBe('ready');
    await daemon.close();

    daemon = await startTestDaemon(daemonConfig(stateDir, join(dir.path, 'small', 'overlay.json'), { maxBytes: 512 }));
    status = await poll(
      () => daemon!.status(),
      (s) => s['observed']['outcome'] !== null,
      'first observation',
    );
    expect(status['degraded_reason']).toBe('oversized');
  });

  it('never puts credential values from a rejected overlay into /status, metrics or logs', async () => {
    daemon = await startTestDaemon(daemonConfig(stateDir, output));
    const doc = JSON.parse(await fixtureText(VALID));
    const secret = 'sk-live-THIS-MUST-NOT-LEAK-0123456789';
    doc.overlay.candidates[0].credential.token = secret;
    const status = await processed(daemon, await publish(operator, JSON.stringify(doc, null, 2)));
    expect(status['observed']['outcome']).toBe('rejected');
    expect(JSON.stringify(status)).not.toContain(secret);
    expect(await daemon.metrics()).not.toContain(secret);
    expect(daemon.logLines.join('\n')).not.toContain(secret);
  });
});
