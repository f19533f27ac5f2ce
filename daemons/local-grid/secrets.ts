/**
 * The Secrets a compiled site references by name only, made real for the local grid: credential tokens (random,
 * kept across starts), TLS secrets (ca.crt/tls.crt/tls.key from the grid PKI: the provider gateway's server
 * certificate, the consumer gateway's client certificate), grid-ca, the site identity and the shared SWIM key.
 * Values never leave this module except into the site's store and the pod files that mount them.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { CallerKeysFile } from '../../schemas/gateway/caller-keys.ts';
import { tightenPrivateFileSync, writePrivateFileSync } from '../shared/private-files.ts';
import type { KubeObject } from '../shared/resource-store/types.ts';
import { type CompiledSite, configMapData, type PodPlan } from './compiled-grid.ts';
import type { GridPki, SitePki } from './pki.ts';
import { isGatewayConfig, isProviderGatewayConfig } from './rewrite.ts';

export type SecretData = Record<string, Buffer>;

export interface SiteSecret {
  readonly name: string;
  readonly namespace: string;
  readonly data: SecretData;
  /** Credential tokens (as opposed to certificates and keys): what the leak check looks for. */
  readonly tokenKeys: readonly string[];
  /** A provider's credential (an InferenceProvider's or a tool's auth.secretRef): only its provider gateway holds it. */
  readonly providerCredential?: boolean;
}

interface Ref {
  name: string;
  namespace?: string;
  key?: string;
}

/** The shared SWIM key of the mesh: 32 random bytes, written once into the grid's PKI directory. */
export function ensureSwimKey(pkiDir: string): Buffer {
  const file = join(pkiDir, 'swim.key');
  if (existsSync(file)) {
    const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'hex');
    if (key.length === 32) {
      tightenPrivateFileSync(file);
      return key;
    }
  }
  const key = randomBytes(32);
  writePrivateFileSync(file, `${key.toString('hex')}\n`);
  return key;
}

/** The gateway configs (praxis.yaml documents) of a pod's ConfigMap volumes. */
function podGatewayConfigs(site: CompiledSite, pod: PodPlan): Record<string, unknown>[] {
  const configs: Record<string, unknown>[] = [];
  for (const volume of pod.volumes) {
    const names = [volume.configMap?.name, ...(volume.projected?.sources ?? []).map((s) => s.configMap?.name)];
    for (const name of names) {
      if (name === undefined) continue;
      for (const text of Object.values(configMapData(site, pod.namespace, name) ?? {})) {
        try {
          const doc: unknown = parseYaml(text);
          if (isGatewayConfig(doc)) configs.push(doc as Record<string, unknown>);
        } catch {
          // Not YAML: not a gateway config.
        }
      }
    }
  }
  return configs;
}

/**
 * Secrets projected where an operator container reads the grid CA certificate and key that sign enrolled sites
 * (GRID_CA_CERT / GRID_CA_KEY of its enrollment endpoint): they hold the CA pair, not a leaf.
 */
function podCaSignerSecrets(pod: PodPlan): Set<string> {
  const names = new Set<string>();
  for (const container of pod.containers) {
    for (const env of container.env ?? []) {
      if ((env.name !== 'GRID_CA_CERT' && env.name !== 'GRID_CA_KEY') || typeof env.value !== 'string') continue;
      const path = env.value;
      const mount = (container.volumeMounts ?? []).find((m) => path.startsWith(`${m.mountPath.replace(/\/+$/u, '')}/`));
      const volume = pod.volumes.find((v) => v.name === mount?.name);
      for (const secret of [
        volume?.secret?.secretName,
        ...(volume?.projected?.sources ?? []).map((source) => source.secret?.name),
      ])
        if (secret !== undefined) names.add(secret);
    }
  }
  return names;
}

function podIsProviderGateway(site: CompiledSite, pod: PodPlan): boolean {
  return podGatewayConfigs(site, pod).some((doc) => isProviderGatewayConfig(doc));
}

/** The keys_file of every caller_auth filter the pod's gateway runs. */
function podCallerKeysFiles(site: CompiledSite, pod: PodPlan): string[] {
  return podGatewayConfigs(site, pod).flatMap((doc) =>
    ((doc['filter_chains'] ?? []) as { filters?: { filter?: unknown; keys_file?: unknown }[] }[]).flatMap((chain) =>
      (chain.filters ?? []).flatMap((f) =>
        f.filter === 'caller_auth' && typeof f.keys_file === 'string' ? [f.keys_file] : [],
      ),
    ),
  );
}

/** Every Secret the site's objects reference, with its values: existing tokens are kept, certificates come from the PKI. */
export function siteSecrets(
  site: CompiledSite,
  pki: GridPki,
  swimKey: Buffer,
  existing: (namespace: string, name: string) => SecretData | undefined,
  callerKeys: CallerKeysFile = { keys: [] },
): SiteSecret[] {
  const own = pki.sites.find((s) => s.site === site.site) as SitePki;
  const ca = readFileSync(pki.caFile);
  const pem = (pair: { certFile: string; keyFile: string }): SecretData => ({
    'ca.crt': ca,
    'tls.crt': readFileSync(pair.certFile),
    'tls.key': readFileSync(pair.keyFile),
  });
  const wanted = new Map<
    string,
    {
      namespace: string;
      name: string;
      keys: Set<string>;
      tls?: 'provider' | 'consumer' | 'ca-signer';
      callerKeys?: Set<string>;
    }
  >();
  const want = (
    ref: Ref | undefined,
    key: string | undefined,
    fallbackNamespace: string,
    tls?: 'provider' | 'consumer' | 'ca-signer',
  ) => {
    if (ref === undefined || ref.name === undefined) return;
    const namespace = ref.namespace ?? fallbackNamespace;
    const id = `${namespace}/${ref.name}`;
    const entry = wanted.get(id) ?? { namespace, name: ref.name, keys: new Set<string>() };
    if (key !== undefined) entry.keys.add(key);
    if (tls !== undefined) entry.tls = tls;
    wanted.set(id, entry);
  };

  const special = new Map<string, SecretData>();
  for (const network of site.objects.filter((o) => o.kind === 'GridNetwork')) {
    const tls = (
      (network['spec'] ?? {}) as {
        tls?: { caSecretRef?: Ref; siteSecretRef?: Ref; swimKeySecretRef?: Ref; swimKeyRef?: Ref };
      }
    ).tls;
    const swim = tls?.swimKeySecretRef ?? tls?.swimKeyRef;
    if (swim !== undefined) special.set(`${swim.namespace ?? 'grid-system'}/${swim.name}`, { key: swimKey });
    if (tls?.caSecretRef !== undefined)
      special.set(`${tls.caSecretRef.namespace ?? 'grid-system'}/${tls.caSecretRef.name}`, { 'ca.crt': ca });
    if (tls?.siteSecretRef !== undefined)
      special.set(`${tls.siteSecretRef.namespace ?? 'grid-system'}/${tls.siteSecretRef.name}`, pem(own.siteIdentity));
  }
  const credentials = new Set<string>();
  for (const object of site.objects) {
    const auth = ((object['spec'] ?? {}) as { auth?: { secretRef?: Ref } }).auth;
    if (auth?.secretRef === undefined) continue;
    want(auth.secretRef, auth.secretRef.key ?? 'token', 'grid-system');
    credentials.add(`${auth.secretRef.namespace ?? 'grid-system'}/${auth.secretRef.name}`);
  }
  for (const pod of site.pods) {
    const role = podIsProviderGateway(site, pod) ? 'provider' : 'consumer';
    const caSigners = podCaSignerSecrets(pod);
    for (const volume of pod.volumes) {
      const sources = [
        ...(volume.secret !== undefined ? [{ name: volume.secret.secretName, items: volume.secret.items }] : []),
        ...(volume.projected?.sources ?? []).flatMap((s) => (s.secret !== undefined ? [s.secret] : [])),
      ];
      const keysFiles = podCallerKeysFiles(site, pod);
      for (const source of sources) {
        const keys = (source.items ?? []).map((i) => i.key);
        const isTls = keys.includes('tls.crt');
        for (const key of keys)
          want(
            { name: source.name },
            key,
            pod.namespace,
            caSigners.has(source.name) ? 'ca-signer' : isTls ? role : undefined,
          );
        if (keys.length === 0) want({ name: source.name }, undefined, pod.namespace);
        // An item mounted where the gateway's caller_auth reads its keys file carries the demo keys' hashes.
        for (const item of source.items ?? []) {
          if (!keysFiles.some((file) => file.endsWith(`/${item.path}`))) continue;
          const entry = wanted.get(`${pod.namespace}/${source.name}`)!;
          (entry.callerKeys ??= new Set()).add(item.key);
        }
      }
    }
  }

  const out: SiteSecret[] = [];
  for (const [id, data] of special) {
    const [namespace, name] = id.split('/') as [string, string];
    out.push({ namespace, name, data, tokenKeys: [] });
    wanted.delete(id);
  }
  for (const entry of wanted.values()) {
    if (entry.tls === 'ca-signer') {
      out.push({
        namespace: entry.namespace,
        name: entry.name,
        data: { 'tls.crt': ca, 'tls.key': readFileSync(pki.caKeyFile) },
        tokenKeys: [],
      });
      continue;
    }
    if (entry.tls !== undefined) {
      out.push({
        namespace: entry.namespace,
        name: entry.name,
        data: pem(entry.tls === 'provider' ? own.providerGateway : own.consumerClient),
        tokenKeys: [],
      });
      continue;
    }
    const previous = existing(entry.namespace, entry.name) ?? {};
    const data: SecretData = {};
    const keys = entry.keys.size > 0 ? [...entry.keys] : ['token'];
    for (const key of entry.callerKeys ?? []) data[key] = Buffer.from(`${JSON.stringify(callerKeys, null, 2)}\n`);
    for (const key of keys.filter((k) => data[k] === undefined)) {
      const kept = previous[key];
      // 24 random bytes, base64url: 32 characters no log line or overlay can contain by accident.
      data[key] = kept !== undefined && kept.length >= 16 ? kept : Buffer.from(randomBytes(24).toString('base64url'));
    }
    // The keys file holds hashes, not tokens: the leak check looks for the demo keys and hashes themselves (LocalGrid.tokens).
    out.push({
      namespace: entry.namespace,
      name: entry.name,
      data,
      tokenKeys: keys.filter((k) => !(entry.callerKeys?.has(k) ?? false)),
      providerCredential: credentials.has(`${entry.namespace}/${entry.name}`),
    });
  }
  return out.sort((a, b) => `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`));
}

export function secretObject(secret: SiteSecret): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: secret.name,
      namespace: secret.namespace,
      labels: { 'app.kubernetes.io/managed-by': 'agn-local-grid' },
    },
    type: 'Opaque',
    data: Object.fromEntries(Object.entries(secret.data).map(([k, v]) => [k, v.toString('base64')])),
  };
}

export function secretDataOf(object: KubeObject | undefined): SecretData | undefined {
  const data = object?.['data'];
  if (typeof data !== 'object' || data === null) return undefined;
  return Object.fromEntries(
    Object.entries(data as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, 'base64')]),
  );
}
