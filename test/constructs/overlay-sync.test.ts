import { describe, expect, it } from 'vitest';
import * as kplus from 'cdk8s-plus-28';
import { OverlaySync } from '../../constructs/overlay-sync.ts';
import { ConsumerGateway } from '../../constructs/consumer-gateway.ts';
import { overlayConfigMapName } from '../../schemas/overlay/configmap-name.ts';
import { chart, find, podSpec, synth } from './helpers.ts';

const props = { namespace: 'grid-system', network: 'demo', gateway: 'consumer-gateway', localSite: 'east' } as const;

describe('OverlaySync', () => {
  it('synthesizes its ServiceAccount and Role (snapshot)', () => {
    const c = chart();
    new OverlaySync(c, 'sync', props);
    expect(synth(c)).toMatchSnapshot();
  });

  it('may only get/list/watch its one overlay ConfigMap (resourceNames)', () => {
    const c = chart();
    const sync = new OverlaySync(c, 'sync', props);
    expect(sync.configMapName).toBe(overlayConfigMapName('demo', 'consumer-gateway'));
    const role = find(synth(c), 'Role', 'consumer-gateway-overlay-sync') as unknown as { rules: unknown[] };
    expect(role.rules).toEqual([
      {
        apiGroups: [''],
        resources: ['configmaps'],
        verbs: ['get', 'list', 'watch'],
        resourceNames: ['grid-overlay-demo-consumer-gateway'],
      },
    ]);
    const binding = find(synth(c), 'RoleBinding', 'consumer-gateway-overlay-sync') as unknown as {
      subjects: unknown[];
    };
    expect(binding.subjects).toEqual([
      { kind: 'ServiceAccount', name: 'consumer-gateway-overlay-sync', namespace: 'grid-system' },
    ]);
  });

  it('uses the hashed ConfigMap name of docs/contract.md §2.1 for long names', () => {
    const sync = new OverlaySync(chart(), 'sync', { ...props, network: 'n'.repeat(40), gateway: 'g'.repeat(40) });
    expect(sync.configMapName).toBe(overlayConfigMapName('n'.repeat(40), 'g'.repeat(40)));
    expect(sync.configMapName.length).toBeLessThanOrEqual(63);
  });

  it('gives init container and sidecar the docs/contract.md §4 environment, a directory mount and the only token', () => {
    const c = chart();
    new ConsumerGateway(c, 'consumer', {
      namespace: 'grid-system',
      network: 'demo',
      site: 'east',
      upstreams: [{ cluster: 'x', address: 'x.example.com:8443', transport: { mode: 'mutual_tls' } }],
    });
    const pod = podSpec(find(synth(c), 'Deployment', 'consumer-gateway'));
    const init = pod.initContainers?.find((ct) => ct.name === 'overlay-sync-init');
    const sidecar = pod.containers.find((ct) => ct.name === 'overlay-sync');
    const env = (ct: typeof init): Record<string, string | undefined> =>
      Object.fromEntries((ct?.env ?? []).map((e) => [e.name, e.value]));
    expect(env(sidecar)).toEqual({
      OVERLAY_SYNC_NAMESPACE: 'grid-system',
      OVERLAY_SYNC_CONFIGMAP: 'grid-overlay-demo-consumer-gateway',
      OVERLAY_SYNC_DATA_KEY: 'routing-overlay.json',
      OVERLAY_SYNC_OUTPUT: '/run/praxis-routing/routing-overlay.json',
      OVERLAY_SYNC_EXPECTED_NETWORK: 'demo',
      OVERLAY_SYNC_EXPECTED_GATEWAY: 'consumer-gateway',
      OVERLAY_SYNC_EXPECTED_NAMESPACE: 'grid-system',
      OVERLAY_SYNC_EXPECTED_LOCAL_SITE: 'east',
      OVERLAY_SYNC_MAX_BYTES: '1048576',
      OVERLAY_SYNC_HEALTH_ADDR: '0.0.0.0:9091',
    });
    expect(env(init)).toEqual({ ...env(sidecar), OVERLAY_SYNC_ONCE: 'true' });
    expect(pod.serviceAccountName).toBe('consumer-gateway-overlay-sync');
    expect(pod.automountServiceAccountToken).toBe(false);
    const tokenMounts = [...(pod.initContainers ?? []), ...pod.containers]
      .filter((ct) => ct.volumeMounts?.some((m) => m.name === 'overlay-sync-token'))
      .map((ct) => ct.name);
    expect(tokenMounts).toEqual(['overlay-sync-init', 'overlay-sync']);
    for (const ct of [...(pod.initContainers ?? []), ...pod.containers]) {
      for (const mount of ct.volumeMounts ?? []) expect(mount.subPath).toBeUndefined();
    }
    const overlayMounts = [...(pod.initContainers ?? []), ...pod.containers].map((ct) => [
      ct.name,
      ct.volumeMounts?.find((m) => m.name === 'routing-overlay'),
    ]);
    expect(overlayMounts).toEqual([
      ['overlay-sync-init', { name: 'routing-overlay', mountPath: '/run/praxis-routing' }],
      ['gateway', { name: 'routing-overlay', mountPath: '/run/praxis-routing', readOnly: true }],
      ['overlay-sync', { name: 'routing-overlay', mountPath: '/run/praxis-routing' }],
    ]);
  });

  it('attaches to a deployment created elsewhere (mutator after construction)', () => {
    const c = chart();
    const sync = new OverlaySync(c, 'sync', props);
    const deployment = new kplus.Deployment(c, 'gw', {
      metadata: { name: 'gw' },
      serviceAccount: sync.serviceAccount,
      containers: [{ name: 'x', image: 'x' }],
    });
    const overlay = kplus.Volume.fromEmptyDir(c, 'overlay', 'routing-overlay');
    const tmp = kplus.Volume.fromEmptyDir(c, 'tmp', 'tmp');
    sync.attachTo(deployment, overlay, tmp);
    const pod = podSpec(find(synth(c), 'Deployment', 'gw'));
    expect(pod.containers.map((ct) => ct.name)).toEqual(['x', 'overlay-sync']);
    expect(pod.initContainers?.map((ct) => ct.name)).toEqual(['overlay-sync-init']);
  });
});
