// One container of a compiled pod template as `podman run` arguments, read field by field from the synthesized
// YAML the way a kubelet would apply it: command (the image entrypoint replaced), args, env (values and the
// downward-API fields), volume mounts, the container and pod security context, and resource limits. Anything this
// translation cannot honour throws with the pod and field named, so the suite never runs a spec it silently changed.

export interface EnvVar {
  readonly name: string;
  readonly value?: string;
  readonly valueFrom?: { readonly fieldRef?: { readonly fieldPath?: string }; readonly [source: string]: unknown };
}

export interface SecurityContext {
  readonly runAsUser?: number;
  readonly runAsGroup?: number;
  readonly runAsNonRoot?: boolean;
  readonly readOnlyRootFilesystem?: boolean;
  readonly allowPrivilegeEscalation?: boolean;
  readonly privileged?: boolean;
  readonly capabilities?: { readonly drop?: readonly string[]; readonly add?: readonly string[] };
  readonly seccompProfile?: { readonly type?: string };
  readonly fsGroup?: number;
}

export interface ContainerTemplate {
  readonly name: string;
  readonly image: string;
  readonly command?: readonly string[];
  readonly args?: readonly string[];
  readonly workingDir?: string;
  readonly env?: readonly EnvVar[];
  readonly ports?: readonly { readonly containerPort: number; readonly name?: string; readonly protocol?: string }[];
  readonly volumeMounts?: readonly {
    readonly name: string;
    readonly mountPath: string;
    readonly readOnly?: boolean;
    readonly subPath?: string;
  }[];
  readonly securityContext?: SecurityContext;
  readonly resources?: { readonly limits?: { readonly cpu?: string; readonly memory?: string } };
  readonly livenessProbe?: Probe;
  readonly readinessProbe?: Probe;
}

export interface Probe {
  readonly httpGet?: { readonly path?: string; readonly port?: number | string };
}

export interface PodTemplateSpec {
  readonly containers: readonly ContainerTemplate[];
  readonly initContainers?: readonly ContainerTemplate[];
  readonly volumes?: readonly { readonly name: string; readonly [source: string]: unknown }[];
  readonly securityContext?: SecurityContext;
  readonly serviceAccountName?: string;
  readonly automountServiceAccountToken?: boolean;
  readonly terminationGracePeriodSeconds?: number;
}

/** What the runtime supplies beyond the template: where each volume lives on the host, the pod's identity. */
export interface PodRuntimeContext {
  /** The podman pod the container joins (shared network namespace and /etc/hosts, as in a Kubernetes pod). */
  readonly podName: string;
  /** The Kubernetes pod name (downward API metadata.name). */
  readonly name: string;
  readonly namespace: string;
  readonly podIP: string;
  /** Host directory of a pod volume. */
  readonly volumeDir: (volume: string) => string;
  /** Host directory of the automounted service-account token (token, ca.crt, namespace), when the pod gets one. */
  readonly serviceAccountDir?: string;
  /** What a kubelet adds to every container (KUBERNETES_SERVICE_HOST/PORT). */
  readonly clusterEnv: Readonly<Record<string, string>>;
}

export class PodSpecError extends Error {
  constructor(where: string, problem: string) {
    super(`${where}: ${problem}`);
    this.name = 'PodSpecError';
  }
}

export const SERVICE_ACCOUNT_MOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';

/** "512Mi" -> "512m" (podman's m is MiB), "1Gi" -> "1g"; plain bytes stay. */
export function memoryLimit(quantity: string, where: string): string {
  const match = /^(\d+)(Ki|Mi|Gi)?$/u.exec(quantity);
  if (match === null)
    throw new PodSpecError(where, `memory limit "${quantity}" is not a binary quantity this suite translates`);
  const unit = { Ki: 'k', Mi: 'm', Gi: 'g' }[match[2] ?? ''] ?? '';
  return `${match[1]}${unit}`;
}

/** "500m" -> "0.5", "2" -> "2". */
export function cpuLimit(quantity: string, where: string): string {
  const milli = /^(\d+)m$/u.exec(quantity);
  if (milli !== null) return String(Number(milli[1]) / 1000);
  if (/^\d+(\.\d+)?$/u.test(quantity)) return quantity;
  throw new PodSpecError(where, `cpu limit "${quantity}" is not a quantity this suite translates`);
}

/** `podman run` arguments (after `run`) for one container of the pod, image and command last. */
export function podmanRunArgs(
  spec: PodTemplateSpec,
  container: ContainerTemplate,
  ctx: PodRuntimeContext,
  runName: string,
): string[] {
  const where = `${ctx.namespace}/${ctx.name}/${container.name}`;
  const pod = spec.securityContext ?? {};
  const own = container.securityContext ?? {};
  const user = own.runAsUser ?? pod.runAsUser;
  const group = own.runAsGroup ?? pod.runAsGroup;
  if ((own.runAsNonRoot ?? pod.runAsNonRoot) === true && (user === undefined || user === 0)) {
    throw new PodSpecError(
      where,
      'runAsNonRoot is set but no non-zero runAsUser is given (the image user is not checked here)',
    );
  }
  if (own.privileged === true || (own.capabilities?.add ?? []).length > 0)
    throw new PodSpecError(where, 'privileged or added capabilities are not translated');
  if (container.command === undefined || container.command.length === 0)
    throw new PodSpecError(where, 'no command: every AGN container names its daemon');

  const args = ['--name', runName, '--pod', ctx.podName];
  if (user !== undefined) args.push('--user', group === undefined ? String(user) : `${user}:${group}`);
  if (pod.fsGroup !== undefined) args.push('--group-add', String(pod.fsGroup));
  // A read-only root with no tmpfs added behind the spec's back: /tmp is whatever volume the spec mounts there.
  if (own.readOnlyRootFilesystem === true) args.push('--read-only', '--read-only-tmpfs=false');
  if (own.allowPrivilegeEscalation === false) args.push('--security-opt', 'no-new-privileges');
  for (const cap of own.capabilities?.drop ?? []) args.push('--cap-drop', cap === 'ALL' ? 'all' : cap);
  const seccomp = own.seccompProfile?.type ?? pod.seccompProfile?.type;
  if (seccomp !== undefined && seccomp !== 'RuntimeDefault')
    throw new PodSpecError(where, `seccompProfile ${seccomp} is not translated (RuntimeDefault is podman's default)`);
  const limits = container.resources?.limits;
  if (limits?.memory !== undefined) args.push('--memory', memoryLimit(limits.memory, where));
  if (limits?.cpu !== undefined) args.push('--cpus', cpuLimit(limits.cpu, where));
  if (container.workingDir !== undefined) args.push('--workdir', container.workingDir);

  const fields: Record<string, string> = {
    'metadata.name': ctx.name,
    'metadata.namespace': ctx.namespace,
    'status.podIP': ctx.podIP,
  };
  const env: [string, string][] = Object.entries(ctx.clusterEnv);
  for (const variable of container.env ?? []) {
    if (variable.value !== undefined) {
      env.push([variable.name, variable.value]);
      continue;
    }
    const path = variable.valueFrom?.fieldRef?.fieldPath;
    const value = path === undefined ? undefined : fields[path];
    if (value === undefined)
      throw new PodSpecError(
        where,
        `env ${variable.name}: source ${JSON.stringify(variable.valueFrom)} is not translated`,
      );
    env.push([variable.name, value]);
  }
  for (const [name, value] of env) args.push('--env', `${name}=${value}`);

  const volumes = new Set((spec.volumes ?? []).map((v) => v.name));
  for (const mount of container.volumeMounts ?? []) {
    if (!volumes.has(mount.name)) throw new PodSpecError(where, `volumeMount ${mount.name} names no volume of the pod`);
    if (mount.subPath !== undefined)
      throw new PodSpecError(where, `volumeMount ${mount.name}: subPath is not translated`);
    args.push('--volume', `${ctx.volumeDir(mount.name)}:${mount.mountPath}:${mount.readOnly === true ? 'ro' : 'rw'}`);
  }
  const mountsToken = (container.volumeMounts ?? []).some((m) => m.mountPath === SERVICE_ACCOUNT_MOUNT);
  if (ctx.serviceAccountDir !== undefined && !mountsToken)
    args.push('--volume', `${ctx.serviceAccountDir}:${SERVICE_ACCOUNT_MOUNT}:ro`);

  // command replaces the image entrypoint, args its cmd: exactly the kubelet's rule.
  args.push('--entrypoint', JSON.stringify(container.command), container.image, ...(container.args ?? []));
  return args;
}
