/**
 * Mount requirements of a generated consumer config (reported in GridNetwork status.praxisConfigStatus): which
 * projected volumes the consumer pod needs for the generated praxis.yaml to start — the credential Secrets under
 * credentialMountPath, the site TLS Secret at tlsCertMountPath, tls-mode custom CAs and the routing overlay at
 * /etc/praxis/routing/routing-overlay.json — rendered as one canonical document whose digest names the
 * grid-mount-requirements-<hash> ConfigMap. Pure: references and paths only, never a Secret's bytes.
 *
 * The same module holds the pure Deployment edits of delegated mount reconciliation: the operator manages only the
 * RESERVED_VOLUMES and the selected container's mounts of them, plus one pod-template annotation.
 */
import { createHash } from 'node:crypto';
import { canonicalize } from '../../../schemas/canonical-json.ts';
import type { GridNetworkSpec, PraxisConfig } from '../../../schemas/generated/gridnetworks.ts';
import type { OverlayCandidate } from '../../../schemas/generated/overlay-envelope.ts';
import { mountRequirementsConfigMapName } from '../../../schemas/object-names.ts';
import { overlayConfigMapName } from '../../../schemas/overlay/configmap-name.ts';
import type { KubeObject } from '../../shared/resource-store/types.ts';
import { type ConfigMapObject, FIELD_MANAGER, LABEL_GATEWAY, LABEL_NETWORK, MANAGED_BY } from '../kinds.ts';
import type { GatewayReference } from '../../routing/model.ts';
import { OVERLAY_DATA_KEY } from './overlay-publisher.ts';
import {
  BACKEND_CA_MOUNT_ROOT,
  DEFAULT_CREDENTIAL_MOUNT_PATH,
  DEFAULT_TLS_CERT_MOUNT_PATH,
  OVERLAY_FILE,
} from './praxis-config.ts';

export const MOUNT_REQUIREMENTS_KEY = 'mount-requirements.json';
export const MOUNT_REQUIREMENTS_KIND = 'MountRequirements';
/** The one opt-in a Deployment must carry before the operator patches it (value exactly "enabled"). */
export const ANNOTATION_MOUNT_RECONCILIATION = 'grid.praxis.fast/mount-reconciliation';
export const MOUNT_RECONCILIATION_ENABLED = 'enabled';
/** Pod-template annotation carrying the requirements revision: a new value rolls the pods out. */
export const ANNOTATION_CONFIG_REVISION = 'grid.praxis.fast/config-revision';
/** On the requirements ConfigMap, so a reader need not recompute the digest. */
export const ANNOTATION_REQUIREMENTS_REVISION = 'grid.praxis.fast/mount-requirements-revision';

export const VOLUME_CREDENTIALS = 'grid-credentials';
export const VOLUME_TLS = 'grid-tls';
export const VOLUME_BACKEND_CA = 'grid-backend-ca';
export const VOLUME_ROUTING_OVERLAY = 'grid-routing-overlay';
/** Volume names the operator owns in a delegated Deployment; a user volume must not use them. */
export const RESERVED_VOLUMES: readonly string[] = [
  VOLUME_CREDENTIALS,
  VOLUME_TLS,
  VOLUME_BACKEND_CA,
  VOLUME_ROUTING_OVERLAY,
];
/** 0644, the API server's default, written out so a re-read Deployment compares equal. */
const DEFAULT_MODE = 0o644;
/** The site TLS Secret's keys (constructs/gateway-paths.ts); the CA Secret (with its key) is never mounted. */
const TLS_KEYS = ['ca.crt', 'tls.crt', 'tls.key'] as const;
const OVERLAY_DIR = OVERLAY_FILE.slice(0, OVERLAY_FILE.lastIndexOf('/'));

export interface KeyToPath {
  key: string;
  path: string;
}

export type ProjectionSource =
  | { secret: { name: string; items: KeyToPath[] } }
  | { configMap: { name: string; items: KeyToPath[] } };

export interface RequiredVolume {
  /** One of RESERVED_VOLUMES. */
  name: string;
  mountPath: string;
  /** Always a projected volume mounted as a directory: a subPath mount would never see an update. */
  projected: { defaultMode: number; sources: ProjectionSource[] };
}

export interface RequiredSecret {
  name: string;
  keys: string[];
  purpose: 'credential' | 'tls' | 'backend-ca';
}

export interface MountRequirementsDocument {
  apiVersion: 'grid.praxis.fast/v1alpha1';
  kind: typeof MOUNT_REQUIREMENTS_KIND;
  network: string;
  gateway: { name: string; namespace: string };
  /** The generated config these mounts serve: its digest is part of the revision, so a config change rolls out. */
  praxisConfig: { configMapName: string; sha256: string };
  overlayConfigMapName: string;
  /** Secrets by name in the gateway namespace; the document never holds their data. */
  secrets: RequiredSecret[];
  volumes: RequiredVolume[];
}

export interface MountRequirementsInput {
  readonly network: string;
  readonly gateway: GatewayReference;
  readonly praxis: PraxisConfig;
  readonly configMapName: string;
  /** The rendered praxis.yaml text (hashed, never copied). */
  readonly configText: string;
  readonly candidates: readonly OverlayCandidate[];
  readonly tls: GridNetworkSpec['tls'];
  /**
   * The overlay revision is held back (credentialHoldBack: projected mode, supportsProjectedCredentials not yet
   * set). Step one of the projected-credential two-step (praxis-config.ts) rolls out only the credential mount root:
   * the candidates' credential Secrets are neither required nor mounted until step two, so a Secret that does not exist
   * yet cannot block it.
   */
  readonly credentialsHeld?: boolean;
}

export type MountRequirementsResult =
  | {
      readonly ok: true;
      readonly document: MountRequirementsDocument;
      readonly revision: string;
      readonly text: string;
    }
  | { readonly ok: false; readonly reason: string; readonly message: string };

const byString = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

function secretSource(name: string, keys: Iterable<string>, prefix: boolean): ProjectionSource {
  return {
    secret: {
      name,
      items: [...new Set(keys)].sort(byString).map((key) => ({ key, path: prefix ? `${name}/${key}` : key })),
    },
  };
}

/** Renders the requirements of one generating gateway; a Secret outside the gateway namespace is refused. */
export function renderMountRequirements(input: MountRequirementsInput): MountRequirementsResult {
  const { gateway, praxis } = input;
  const outside: string[] = [];
  const secrets: RequiredSecret[] = [];
  const volumes: RequiredVolume[] = [];

  const credentialKeys = new Map<string, Set<string>>();
  for (const c of input.credentialsHeld === true ? [] : input.candidates) {
    const ref = c.credential?.secretRef;
    if (ref === undefined) continue;
    if (ref.namespace !== gateway.namespace) {
      outside.push(`credential Secret ${ref.namespace}/${ref.name} (candidate ${c.site}/${c.cluster})`);
      continue;
    }
    const keys = credentialKeys.get(ref.name) ?? new Set<string>();
    keys.add(ref.key);
    credentialKeys.set(ref.name, keys);
  }
  // Projected mode always carries the mount root (an empty projected volume while nothing is mounted yet), so the
  // step-one rollout already has the directory the generated config resolves references under.
  if (credentialKeys.size > 0 || praxis.enableProjectedCredentials === true) {
    const names = [...credentialKeys.keys()].sort(byString);
    volumes.push({
      name: VOLUME_CREDENTIALS,
      mountPath: praxis.credentialMountPath ?? praxis.credentialMountBase ?? DEFAULT_CREDENTIAL_MOUNT_PATH,
      projected: {
        defaultMode: DEFAULT_MODE,
        sources: names.map((n) => secretSource(n, credentialKeys.get(n) ?? [], true)),
      },
    });
    for (const n of names)
      secrets.push({ name: n, keys: [...(credentialKeys.get(n) ?? [])].sort(byString), purpose: 'credential' });
  }

  const endpoints = praxis.clusterEndpoints ?? [];
  if (endpoints.some((e) => e.transport?.mode === 'mutual_tls')) {
    const site = input.tls?.siteSecretRef;
    if (site === undefined) {
      return {
        ok: false,
        reason: 'MissingTlsSecret',
        message: `gateway ${gateway.namespace}/${gateway.name}: a mutual_tls cluster needs spec.tls.siteSecretRef for ${praxis.tlsCertMountPath ?? DEFAULT_TLS_CERT_MOUNT_PATH}`,
      };
    }
    if (site.namespace !== gateway.namespace)
      outside.push(`TLS Secret ${site.namespace}/${site.name} (spec.tls.siteSecretRef)`);
    else {
      volumes.push({
        name: VOLUME_TLS,
        mountPath: praxis.tlsCertMountPath ?? DEFAULT_TLS_CERT_MOUNT_PATH,
        projected: { defaultMode: DEFAULT_MODE, sources: [secretSource(site.name, TLS_KEYS, false)] },
      });
      secrets.push({ name: site.name, keys: [...TLS_KEYS], purpose: 'tls' });
    }
  }

  const caKeys = new Map<string, Set<string>>();
  for (const e of endpoints) {
    const ca = e.transport?.mode === 'tls' ? e.transport.caSecretRef : undefined;
    if (ca === undefined) continue;
    const keys = caKeys.get(ca.name) ?? new Set<string>();
    keys.add(ca.key ?? 'ca.crt');
    caKeys.set(ca.name, keys);
  }
  if (caKeys.size > 0) {
    const names = [...caKeys.keys()].sort(byString);
    volumes.push({
      name: VOLUME_BACKEND_CA,
      mountPath: BACKEND_CA_MOUNT_ROOT,
      projected: { defaultMode: DEFAULT_MODE, sources: names.map((n) => secretSource(n, caKeys.get(n) ?? [], true)) },
    });
    for (const n of names)
      secrets.push({ name: n, keys: [...(caKeys.get(n) ?? [])].sort(byString), purpose: 'backend-ca' });
  }

  if (outside.length > 0) {
    return {
      ok: false,
      reason: 'SecretOutsideGatewayNamespace',
      message: `Secret references must be in the gateway namespace ${gateway.namespace}: ${outside.slice(0, 4).join(', ')}${outside.length > 4 ? ` and ${outside.length - 4} more` : ''}`,
    };
  }

  const overlayName = overlayConfigMapName(input.network, gateway.name);
  volumes.push({
    name: VOLUME_ROUTING_OVERLAY,
    mountPath: OVERLAY_DIR,
    projected: {
      defaultMode: DEFAULT_MODE,
      sources: [{ configMap: { name: overlayName, items: [{ key: OVERLAY_DATA_KEY, path: OVERLAY_DATA_KEY }] } }],
    },
  });
  volumes.sort((a, b) => byString(a.name, b.name));
  secrets.sort((a, b) => byString(`${a.name}/${a.purpose}`, `${b.name}/${b.purpose}`));

  const document: MountRequirementsDocument = {
    apiVersion: 'grid.praxis.fast/v1alpha1',
    kind: MOUNT_REQUIREMENTS_KIND,
    network: input.network,
    gateway: { name: gateway.name, namespace: gateway.namespace },
    praxisConfig: {
      configMapName: input.configMapName,
      sha256: createHash('sha256').update(input.configText).digest('hex'),
    },
    overlayConfigMapName: overlayName,
    secrets,
    volumes,
  };
  const text = canonicalize(document);
  return {
    ok: true,
    document,
    revision: createHash('sha256').update(text).digest('hex').slice(0, 16),
    text: `${text}\n`,
  };
}

export function mountRequirementsConfigMap(
  network: string,
  gateway: GatewayReference,
  revision: string,
  text: string,
): ConfigMapObject {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: mountRequirementsConfigMapName(revision),
      namespace: gateway.namespace,
      labels: { [MANAGED_BY]: FIELD_MANAGER, [LABEL_NETWORK]: network, [LABEL_GATEWAY]: gateway.name },
      annotations: { [ANNOTATION_REQUIREMENTS_REVISION]: revision },
    },
    data: { [MOUNT_REQUIREMENTS_KEY]: text },
  };
}

/** True when the operator created this object for this gateway: the only ones it ever deletes. */
export function ownedBy(object: KubeObject | undefined, network: string, gateway: string): boolean {
  const labels = object?.metadata.labels;
  return (
    labels?.[MANAGED_BY] === FIELD_MANAGER && labels[LABEL_NETWORK] === network && labels[LABEL_GATEWAY] === gateway
  );
}

// ---- Deployment edits -------------------------------------------------------------------------------------------

interface VolumeMount {
  name: string;
  mountPath: string;
  readOnly?: boolean;
  subPath?: string;
  [key: string]: unknown;
}
interface Container {
  name: string;
  volumeMounts?: VolumeMount[];
  [key: string]: unknown;
}
interface Volume {
  name: string;
  [key: string]: unknown;
}
interface PodTemplate {
  metadata?: { annotations?: Record<string, string>; [key: string]: unknown };
  spec?: { containers?: Container[]; volumes?: Volume[]; [key: string]: unknown };
}
export interface DeploymentObject extends KubeObject {
  spec?: { replicas?: number; template?: PodTemplate; [key: string]: unknown };
  status?: {
    observedGeneration?: number;
    replicas?: number;
    updatedReplicas?: number;
    availableReplicas?: number;
    [key: string]: unknown;
  };
}

const reserved = (name: string): boolean => RESERVED_VOLUMES.includes(name);

/** Why this Deployment cannot be delegated (undefined when it can); names and paths only. */
export function deploymentProblem(
  deployment: DeploymentObject,
  containerName: string,
  volumes: readonly RequiredVolume[],
): { reason: string; message: string } | undefined {
  const at = `Deployment ${deployment.metadata.namespace}/${deployment.metadata.name}`;
  if (deployment.metadata.annotations?.[ANNOTATION_MOUNT_RECONCILIATION] !== MOUNT_RECONCILIATION_ENABLED) {
    return {
      reason: 'DeploymentNotAnnotated',
      message: `${at} lacks the annotation ${ANNOTATION_MOUNT_RECONCILIATION}: "${MOUNT_RECONCILIATION_ENABLED}"; it is left untouched`,
    };
  }
  const pod = deployment.spec?.template?.spec;
  const container = pod?.containers?.find((c) => c.name === containerName);
  if (container === undefined)
    return { reason: 'ContainerNotFound', message: `${at} has no container "${containerName}"` };
  for (const v of volumes) {
    const clash = (container.volumeMounts ?? []).find((m) => !reserved(m.name) && m.mountPath === v.mountPath);
    if (clash !== undefined)
      return {
        reason: 'MountPathConflict',
        message: `${at} container "${containerName}" already mounts volume "${clash.name}" at ${v.mountPath}`,
      };
  }
  return undefined;
}

function volumeOf(v: RequiredVolume): Volume {
  return { name: v.name, projected: v.projected };
}
function mountOf(v: RequiredVolume): VolumeMount {
  return { name: v.name, mountPath: v.mountPath, readOnly: true };
}

/**
 * The server-side apply configuration the operator's field manager owns: only its projected volumes, the selected
 * container's mounts of them and the revision annotation. The API server merges lists by key (volumes by name,
 * containers by name, volumeMounts by mountPath) and drops entries this manager applied before but no longer lists.
 */
export function deploymentApplyConfiguration(
  name: string,
  namespace: string,
  containerName: string,
  volumes: readonly RequiredVolume[],
  revision: string,
): DeploymentObject {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace },
    spec: {
      template: {
        metadata: { annotations: { [ANNOTATION_CONFIG_REVISION]: revision } },
        spec: {
          containers: [{ name: containerName, volumeMounts: volumes.map(mountOf) }],
          volumes: volumes.map(volumeOf),
        },
      },
    },
  };
}

/**
 * The same edit applied to a whole Deployment, for the local store, which has no field ownership and replaces spec
 * on apply: other containers, user volumes and user mounts are kept as they are; reserved ones are replaced.
 */
export function withMounts(
  deployment: DeploymentObject,
  containerName: string,
  volumes: readonly RequiredVolume[],
  revision: string,
): DeploymentObject {
  const next = structuredClone(deployment);
  const template: PodTemplate = next.spec?.template ?? {};
  const pod = template.spec ?? {};
  pod.volumes = [...(pod.volumes ?? []).filter((v) => !reserved(v.name)), ...volumes.map(volumeOf)];
  pod.containers = (pod.containers ?? []).map((c) =>
    c.name !== containerName
      ? c
      : { ...c, volumeMounts: [...(c.volumeMounts ?? []).filter((m) => !reserved(m.name)), ...volumes.map(mountOf)] },
  );
  template.spec = pod;
  template.metadata = {
    ...template.metadata,
    annotations: { ...template.metadata?.annotations, [ANNOTATION_CONFIG_REVISION]: revision },
  };
  next.spec = { ...next.spec, template };
  return next;
}

/** True when the Deployment already carries exactly these reserved volumes and mounts at this revision. */
export function mountsInPlace(
  deployment: DeploymentObject,
  containerName: string,
  volumes: readonly RequiredVolume[],
  revision: string,
): boolean {
  const template = deployment.spec?.template;
  if (template?.metadata?.annotations?.[ANNOTATION_CONFIG_REVISION] !== revision) return false;
  const have = (template.spec?.volumes ?? [])
    .filter((v) => reserved(v.name))
    .map((v) => v.name)
    .sort(byString);
  const container = template.spec?.containers?.find((c) => c.name === containerName);
  const mounted = (container?.volumeMounts ?? [])
    .filter((m) => reserved(m.name))
    .map((m) => `${m.name}@${m.mountPath}`)
    .sort(byString);
  const want = volumes.map((v) => v.name).sort(byString);
  return (
    canonicalize(have) === canonicalize(want) &&
    canonicalize(mounted) === canonicalize(volumes.map((v) => `${v.name}@${v.mountPath}`).sort(byString))
  );
}

/** kubectl rollout status semantics: the controller saw this generation and every replica runs the new template. */
export function rolloutDone(deployment: DeploymentObject): boolean {
  const status = deployment.status;
  const generation = deployment.metadata.generation ?? 0;
  if (status === undefined || (status.observedGeneration ?? 0) < generation) return false;
  const desired = deployment.spec?.replicas ?? 1;
  const updated = status.updatedReplicas ?? 0;
  if (updated < desired) return false;
  if ((status.replicas ?? 0) > updated) return false;
  return (status.availableReplicas ?? 0) >= updated;
}
