// Every daemon container in dist/ gets time to start before its liveness probe can kill it: a startup probe on the
// liveness endpoint, asked often (a quick start is Ready at once) and for long enough (a busy node's gateway took
// 28 s to load and warm up, where the liveness probe alone allows 30 s). Found on the real node (test/node/).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { REPO_ROOT } from '../fixtures-path.ts';

interface Probe {
  httpGet?: { path: string; port: number | string };
  periodSeconds?: number;
  failureThreshold?: number;
}
interface Container {
  name: string;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  startupProbe?: Probe;
}

const containers = readdirSync(join(REPO_ROOT, 'dist'))
  .flatMap((file) =>
    YAML.parseAllDocuments(readFileSync(join(REPO_ROOT, 'dist', file), 'utf8')).map((doc) => ({
      file,
      manifest: doc.toJS() as { kind?: string; metadata?: { name: string }; spec?: any },
    })),
  )
  .filter(({ manifest }) => manifest?.kind === 'Deployment')
  .flatMap(({ file, manifest }) =>
    (manifest.spec.template.spec.containers as Container[]).map((container) => ({
      at: `${file} ${manifest.metadata?.name}/${container.name}`,
      container,
    })),
  );

describe('daemon probes in dist/', () => {
  it('finds the daemons', () => {
    expect(containers.length).toBeGreaterThanOrEqual(9);
  });

  it.each(containers)(
    '$at: a startup probe of at least 2 minutes, every 2 s, on the liveness endpoint',
    ({ container }) => {
      const { livenessProbe, startupProbe } = container;
      expect(livenessProbe?.httpGet).toBeDefined();
      expect(startupProbe?.httpGet).toEqual(livenessProbe?.httpGet);
      expect(startupProbe?.periodSeconds).toBeLessThanOrEqual(2);
      expect((startupProbe?.periodSeconds ?? 10) * (startupProbe?.failureThreshold ?? 3)).toBeGreaterThanOrEqual(120);
    },
  );
});
