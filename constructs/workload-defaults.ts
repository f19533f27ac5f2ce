import type { Construct } from 'constructs';
import * as kplus from 'cdk8s-plus-28';
import { Duration, Size } from 'cdk8s';

/**
 * The container defaults every AGN workload shares, written where reviewers see them. They restate the
 * cdk8s-plus secure defaults on purpose (non-root, read-only root filesystem, no privilege escalation) and add
 * what cdk8s-plus leaves open: all capabilities dropped and the runtime's default seccomp profile.
 */
export const CONTAINER_SECURITY: kplus.ContainerSecurityContextProps = {
  ensureNonRoot: true,
  // 10001: the unprivileged user of the project image, so files it writes to emptyDirs are its own.
  user: 10001,
  group: 10001,
  readOnlyRootFilesystem: true,
  allowPrivilegeEscalation: false,
  privileged: false,
  capabilities: { drop: [kplus.Capability.ALL] },
  seccompProfile: { type: kplus.SeccompProfileType.RUNTIME_DEFAULT },
};

/** Pod-level security: the same identity as the containers, and emptyDir/projected files readable by that group. */
export const POD_SECURITY: kplus.PodSecurityContextProps = {
  ensureNonRoot: true,
  user: 10001,
  group: 10001,
  fsGroup: 10001,
};

/** Builds requests and limits; every daemon is small, so the defaults are small and overridable per construct. */
export function resources(
  cpuMillis: number,
  memoryMiB: number,
  cpuLimitMillis: number,
  memoryLimitMiB: number,
): kplus.ContainerResources {
  return {
    cpu: { request: kplus.Cpu.millis(cpuMillis), limit: kplus.Cpu.millis(cpuLimitMillis) },
    memory: { request: Size.mebibytes(memoryMiB), limit: Size.mebibytes(memoryLimitMiB) },
  };
}

/**
 * A daemon's probes. The liveness probe alone would give a starting process 30 s (3 failures, 10 s apart): a gateway
 * that loads its modules and warms its request path on a busy node took 28 s, and was killed and restarted in a
 * loop. The startup probe gives a start up to 2 minutes, asking every 2 s so a quick start is Ready at once; the
 * kubelet runs liveness and readiness only after it has passed.
 */
export function healthProbes(
  port: number,
  livePath: string,
  readyPath: string,
): Pick<kplus.ContainerProps, 'startup' | 'liveness' | 'readiness'> {
  return {
    startup: kplus.Probe.fromHttpGet(livePath, { port, periodSeconds: Duration.seconds(2), failureThreshold: 60 }),
    liveness: kplus.Probe.fromHttpGet(livePath, { port }),
    readiness: kplus.Probe.fromHttpGet(readyPath, { port }),
  };
}

/** The command line of one daemon in the project image. */
export function daemonCommand(daemon: string, args: readonly string[] = []): string[] {
  return ['node', `daemons/${daemon}/main.ts`, ...args];
}

/** The writable scratch directory a read-only root filesystem still needs (Node writes temp files to /tmp). */
export function tmpVolume(scope: Construct): kplus.Volume {
  return kplus.Volume.fromEmptyDir(scope, 'tmp', 'tmp', { sizeLimit: Size.mebibytes(64) });
}

/** Constructor shape of kplus.Volume, which is JS-public but typed private. */
type VolumeConstructor = new (
  scope: Construct,
  id: string,
  name: string,
  config: { projected: kplus.k8s.ProjectedVolumeSource },
) => kplus.Volume;

/**
 * A projected volume. cdk8s-plus-28 has no factory for one, but its Volume spreads the config it was built with
 * into the pod's volume entry, so this reaches the same constructor its own factories call. We need projected
 * volumes twice: to put the gateway config, TLS files and credentials under one /etc/praxis mount (nested mounts
 * under a read-only ConfigMap volume fail, and subPath would break hot reload), and to mount a service-account
 * token into the overlay-sync containers only, instead of every container of the pod.
 */
export function projectedVolume(
  scope: Construct,
  id: string,
  name: string,
  projected: kplus.k8s.ProjectedVolumeSource,
): kplus.Volume {
  const ctor = kplus.Volume as unknown as VolumeConstructor;
  return new ctor(scope, id, name, { projected });
}

/** The path where client libraries look for the in-cluster token, CA and namespace. */
export const SERVICE_ACCOUNT_MOUNT_PATH = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * The projected service-account token volume Kubernetes itself would mount with automount, built explicitly so
 * it can be mounted into chosen containers only (the same three files: token, ca.crt, namespace).
 */
export function serviceAccountTokenVolume(scope: Construct, id: string, name: string): kplus.Volume {
  return projectedVolume(scope, id, name, {
    defaultMode: 0o444,
    sources: [
      // One hour, refreshed by the kubelet; the daemons re-read the file (resource-store/kubeconfig.ts).
      { serviceAccountToken: { path: 'token', expirationSeconds: 3600 } },
      { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
      {
        downwardApi: {
          items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }],
        },
      },
    ],
  });
}
