// Every daemon container in dist/ gets time to start before its liveness probe can kill it: a startup probe on the
// liveness endpoint, asked often (a quick start is Ready at once) and for long enough (a busy node's gateway took
// 28 s to load and warm up, where the liveness probe alone allows 30 s). Found on the real node (test/node/).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { REPO_ROOT } from '../fixtures-path.ts';
import { type Manifest, podSpec } from './helpers.ts';

interface Probe {
  httpGet?: { path: string; port: number | string };
  periodSeconds?: number;
  failureThreshold?: number;
}

const containers = readdirSync(join(REPO_ROOT, 'dist'))
  .flatMap((file) =>
    YAML.parseAllDocuments(readFileSync(join(REPO_ROOT, 'dist', file), 'utf8'))
      .map((doc) => doc.toJS() as Manifest)
      .filter((manifest) => manifest?.kind === 'Deployment')
      .map((deployment) => ({ file, deployment })),
  )
  .flatMap(({ file, deployment }) =>
    podSpec(deployment).containers.map((container) => ({
      at: `${file} ${deployment.metadata.name}/${container.name}`,
      liveness: container['livenessProbe'] as Probe | undefined,
      startup: container['startupProbe'] as Probe | undefined,
    })),
  );

describe('daemon probes in dist/', () => {
  it('finds the daemons', () => {
    expect(containers.length).toBeGreaterThanOrEqual(9);
  });

  it.each(containers)(
    '$at: a startup probe of at least 2 minutes, every 2 s, on the liveness endpoint',
    ({ liveness, startup }) => {
      expect(liveness?.httpGet).toBeDefined();
      expect(startup?.httpGet).toEqual(liveness?.httpGet);
      expect(startup?.periodSeconds).toBeLessThanOrEqual(2);
      expect((startup?.periodSeconds ?? 10) * (startup?.failureThreshold ?? 3)).toBeGreaterThanOrEqual(120);
    },
  );
});
