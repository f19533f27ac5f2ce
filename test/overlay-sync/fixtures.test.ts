// Every conformance fixture, published as a ConfigMap on the local store, drives the daemon to the outcome
// the fixture manifest expects, with the matching metric and /status, through the real health server.

import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openLocalStore, type LocalStore } from '../../daemons/shared/resource-store/index.ts';
import { REFERENCE_REASON_ALIASES } from '../../schemas/overlay/reasons.ts';
import {
  daemonConfig,
  FIXTURES_DIR,
  fixtureText,
  makeTempDir,
  metricValue,
  processed,
  publish,
  startTestDaemon,
  type TestDaemon,
} from './helpers.ts';

interface ManifestEntry {
  expected: 'accept' | 'reject' | 'accept_legacy';
  reason?: string;
  revision?: string;
}

const manifest = JSON.parse(await readFile(join(FIXTURES_DIR, 'manifest.json'), 'utf8')) as {
  fixtures: Record<string, ManifestEntry>;
};
const cases: [string, ManifestEntry][] = [
  ...Object.entries(manifest.fixtures),
  // SOURCE.txt: the extra accept case that is not in the manifest.
  [
    'valid-selection-policy.json',
    { expected: 'accept', revision: 'd3321586b5e414b8bd80c07a9d16ac10dce38d6810e3591a8526a6bdd0639007' },
  ],
];

/** overlay-sync's expectation: legacy payloads are malformed here; the reference's finer names map to ours. */
function expectedOutcome(
  entry: ManifestEntry,
): { outcome: 'accepted'; revision: string } | { outcome: 'rejected'; reason: string } {
  if (entry.expected === 'accept') return { outcome: 'accepted', revision: entry.revision ?? '' };
  if (entry.expected === 'accept_legacy') return { outcome: 'rejected', reason: 'malformed' };
  const reason = entry.reason ?? '';
  return { outcome: 'rejected', reason: REFERENCE_REASON_ALIASES[reason] ?? reason };
}

describe('overlay-sync on the overlay-contract-v1 fixtures', () => {
  let dir: Awaited<ReturnType<typeof makeTempDir>>;
  let operator: LocalStore;
  let daemon: TestDaemon | undefined;

  beforeEach(async () => {
    dir = await makeTempDir('sync-fixtures');
    operator = await openLocalStore({ stateDir: join(dir.path, 'state') });
  });
  afterEach(async () => {
    await daemon?.close();
    daemon = undefined;
    await operator.close();
    await dir.remove();
  });

  it('covers every fixture file in the directory', async () => {
    const { readdir } = await import('node:fs/promises');
    const files = (await readdir(FIXTURES_DIR)).filter((f) => f.endsWith('.json') && f !== 'manifest.json').sort();
    expect(cases.map(([name]) => name).sort()).toEqual(files);
  });

  it.each(cases)('%s', async (name, entry) => {
    const expected = expectedOutcome(entry);
    const output = join(dir.path, 'run', 'routing-overlay.json');
    daemon = await startTestDaemon(daemonConfig(join(dir.path, 'state'), output));
    const text = await fixtureText(name);
    const rv = await publish(operator, text);
    const status = await processed(daemon, rv);
    const metrics = await daemon.metrics();

    if (expected.outcome === 'accepted') {
      expect(status['state']).toBe('ready');
      expect(status['observed']['outcome']).toBe('accepted');
      expect(status['written']['revision']).toBe(expected.revision);
      // The exact raw bytes of the ConfigMap value, not a re-serialization.
      expect(await readFile(output, 'utf8')).toBe(text);
      expect(await daemon.readyz()).toBe(200);
      expect(
        metricValue(metrics, 'grid_overlay_sync_events_total', { outcome: 'accepted', reason: 'new_revision' }),
      ).toBe(1);
      expect(metricValue(metrics, 'grid_overlay_sync_file_writes_total', { outcome: 'success' })).toBe(1);
      expect(metricValue(metrics, 'grid_overlay_sync_ready')).toBe(1);
      expect(metricValue(metrics, 'grid_overlay_sync_payload_bytes')).toBe(Buffer.byteLength(text));
    } else {
      expect(status['state']).toBe('cold');
      expect(status['observed']['outcome']).toBe('rejected');
      expect(status['degraded_reason']).toBe(expected.reason);
      expect(status['written']['revision']).toBeNull();
      await expect(stat(output)).rejects.toMatchObject({ code: 'ENOENT' });
      expect(await daemon.readyz()).toBe(503);
      expect(
        metricValue(metrics, 'grid_overlay_sync_events_total', { outcome: 'rejected', reason: expected.reason }),
      ).toBe(1);
      expect(metricValue(metrics, 'grid_overlay_sync_validation_failures_total', { reason: expected.reason })).toBe(1);
      expect(metricValue(metrics, 'grid_overlay_sync_file_writes_total', { outcome: 'success' })).toBe(0);
      expect(metricValue(metrics, 'grid_overlay_sync_ready')).toBe(0);
    }
  });
});
