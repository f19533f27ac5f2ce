// The container suite's translation of a compiled pod template into `podman run` arguments: what it honours and
// what it refuses rather than silently changing (test/containers/pod-spec.ts).
import { describe, expect, it } from 'vitest';
import {
  cpuLimit,
  memoryLimit,
  podmanRunArgs,
  PodSpecError,
  type ContainerTemplate,
  type PodTemplateSpec,
} from '../containers/pod-spec.ts';
import { thrownMessage } from '../thrown.ts';

const CONTAINER: ContainerTemplate = {
  name: 'gateway',
  image: 'ghcr.io/agn-ts/agn:0.1.0',
  command: ['node', 'daemons/gateway/main.ts', '--config', '/etc/praxis/praxis.yaml'],
  env: [
    { name: 'A', value: '1' },
    { name: 'NS', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
  ],
  volumeMounts: [
    { name: 'tmp', mountPath: '/tmp' },
    { name: 'config', mountPath: '/etc/praxis', readOnly: true },
  ],
  securityContext: {
    runAsUser: 10001,
    runAsGroup: 10001,
    runAsNonRoot: true,
    readOnlyRootFilesystem: true,
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  },
  resources: { limits: { cpu: '500m', memory: '256Mi' } },
};
const SPEC: PodTemplateSpec = {
  containers: [CONTAINER],
  volumes: [
    { name: 'tmp', emptyDir: {} },
    { name: 'config', configMap: { name: 'c' } },
  ],
  securityContext: { fsGroup: 10001 },
};
const CTX = {
  podName: 'p',
  name: 'gw-0',
  namespace: 'grid-system',
  podIP: '10.0.0.5',
  volumeDir: (v: string) => `/host/${v}`,
  clusterEnv: { KUBERNETES_SERVICE_HOST: 'kubernetes.default.svc' },
};

describe('podmanRunArgs', () => {
  it('keeps the compiled command as the entrypoint, with user, read-only root, dropped capabilities, limits, env and mounts', () => {
    const args = podmanRunArgs(SPEC, CONTAINER, CTX, 'run-name');
    const joined = args.join(' ');
    expect(args.slice(-2)).toEqual([JSON.stringify(CONTAINER.command), CONTAINER.image]);
    for (const part of [
      '--user 10001:10001',
      '--group-add 10001',
      '--read-only --read-only-tmpfs=false',
      '--security-opt no-new-privileges',
      '--cap-drop all',
      '--memory 256m',
      '--cpus 0.5',
      '--env A=1',
      '--env NS=grid-system',
      '--env KUBERNETES_SERVICE_HOST=kubernetes.default.svc',
      '--volume /host/tmp:/tmp:rw',
      '--volume /host/config:/etc/praxis:ro',
      '--pod p',
      '--name run-name',
    ]) {
      expect(joined).toContain(part);
    }
  });

  it('refuses what it cannot honour, naming the pod and field', () => {
    const root = { ...CONTAINER, securityContext: { ...CONTAINER.securityContext, runAsUser: 0 } };
    expect(thrownMessage(() => podmanRunArgs(SPEC, root, CTX, 'x'), PodSpecError)).toBe(
      'grid-system/gw-0/gateway: runAsNonRoot is set but no non-zero runAsUser is given (the image user is not checked here)',
    );
    const secretEnv = { ...CONTAINER, env: [{ name: 'T', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }] };
    expect(thrownMessage(() => podmanRunArgs(SPEC, secretEnv, CTX, 'x'), PodSpecError)).toMatch(
      /^grid-system\/gw-0\/gateway: env T: source .*secretKeyRef.* is not translated$/u,
    );
    const missing = { ...CONTAINER, volumeMounts: [{ name: 'nope', mountPath: '/x' }] };
    expect(thrownMessage(() => podmanRunArgs(SPEC, missing, CTX, 'x'), PodSpecError)).toBe(
      'grid-system/gw-0/gateway: volumeMount nope names no volume of the pod',
    );
    expect(thrownMessage(() => memoryLimit('1.5G', 'w'), PodSpecError)).toBe(
      'w: memory limit "1.5G" is not a binary quantity this suite translates',
    );
    expect(cpuLimit('2', 'w')).toBe('2');
    expect(memoryLimit('1Gi', 'w')).toBe('1g');
  });
});
