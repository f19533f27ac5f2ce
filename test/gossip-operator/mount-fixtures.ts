// GridNetwork objects with a previous status, for the cleanup tests of generated consumer configs: what the
// operator would have written before the user turned generation off or renamed the ConfigMap.
import type { KubeObject } from '../../daemons/shared/resource-store/types.ts';
import type { GridNetworkResource } from '../../schemas/crds/types.ts';
import type { GridNetworkStatus } from '../../schemas/generated/gridnetworks.ts';
import { mountRequirementsConfigMapName } from '../../schemas/object-names.ts';

interface ConfigMapManifest extends KubeObject {
  metadata: { name: string; namespace: string; labels?: Record<string, string> };
  data: Record<string, string>;
}

export function generatedConfigCleanupFixture(namespace: string): {
  network: GridNetworkResource;
  renamed: GridNetworkResource;
  configMaps: ConfigMapManifest[];
  requirementsName: string;
} {
  const revision = 'abc0123456789def';
  const requirementsName = mountRequirementsConfigMapName(revision);
  const owned = (gateway: string) => ({
    'app.kubernetes.io/managed-by': 'grid-operator',
    'grid.praxis.fast/network': 'grid',
    'grid.praxis.fast/gateway': gateway,
  });
  const status: GridNetworkStatus = {
    praxisConfigStatus: [
      {
        gatewayName: 'edge',
        namespace,
        configMapName: 'praxis-edge',
        phase: 'Rendered',
        reason: '',
        message: 'consumer config rendered',
        observedGeneration: 1,
      },
      {
        gatewayName: 'userland',
        namespace,
        configMapName: 'user-config',
        phase: 'Error',
        reason: 'PraxisConfigApplyFailed',
        message: 'apply failed',
        observedGeneration: 1,
      },
    ],
    mountReconciliationStatus: [
      {
        gatewayName: 'edge',
        namespace,
        requirementsRevision: revision,
        deploymentGeneration: 0,
        phase: 'RequirementsRendered',
        reason: '',
        message: '',
        observedGeneration: 1,
      },
    ],
  };
  const base = (
    consumerGateways: NonNullable<GridNetworkResource['spec']['consumerGateways']>,
  ): GridNetworkResource => ({
    apiVersion: 'grid.praxis.fast/v1alpha1',
    kind: 'GridNetwork',
    metadata: { name: 'grid', generation: 2 },
    spec: { consumerGateways },
    status,
  });
  return {
    network: base([
      { name: 'edge', namespace, praxisConfig: { generate: false, configMapName: 'praxis-edge' } },
      { name: 'userland', namespace },
    ]),
    renamed: base([
      {
        name: 'edge',
        namespace,
        praxisConfig: {
          generate: true,
          configMapName: 'praxis-edge-v2',
          clusterEndpoints: [{ cluster: 'local', address: '127.0.0.1:8000', transport: { mode: 'plaintext' } }],
        },
      },
    ]),
    configMaps: [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'praxis-edge', namespace, labels: owned('edge') },
        data: { 'praxis.yaml': 'old' },
      },
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: requirementsName, namespace, labels: owned('edge') },
        data: { 'mount-requirements.json': '{}' },
      },
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'user-config', namespace },
        data: { 'praxis.yaml': 'mine' },
      },
    ],
    requirementsName,
  };
}
