// overlay-sync configuration: the environment variables of docs/contract.md §4, each with a matching command-line flag
// (the flag wins). Parsed once at start; every mistake is reported with the variable or flag that caused it.

import { parseArgs } from 'node:util';
import { CONTRACT_DEFAULTS, SYNCED_CONTRACTS, type SyncedContract } from './contracts.ts';
import type { OverlayScope } from '../../schemas/overlay/types.ts';
import { OVERLAY_SYNC_MAX_OVERLAY_BYTES } from '../../schemas/overlay/validate.ts';
import { parseListenAddress } from '../shared/admin-server.ts';

export interface OverlaySyncConfig {
  /** What the ConfigMap holds: the routing overlay or the gateway's serving config. */
  readonly contract: SyncedContract;
  readonly namespace: string;
  readonly configMap: string;
  readonly dataKey: string;
  readonly output: string;
  readonly expectedScope: Readonly<Partial<OverlayScope>>;
  readonly maxBytes: number;
  readonly healthAddr: string;
  readonly once: boolean;
  readonly store:
    | { readonly backend: 'kubernetes'; readonly kubeconfigPath?: string }
    | { readonly backend: 'local'; readonly stateDir: string; readonly manifestsDir?: string };
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** Each setting: its flag, its environment variable (absent = flag only), and its default. */
const SETTINGS = {
  contract: { flag: 'contract', env: 'OVERLAY_SYNC_CONTRACT', default: 'overlay' },
  namespace: { flag: 'namespace', env: 'OVERLAY_SYNC_NAMESPACE' },
  configMap: { flag: 'configmap', env: 'OVERLAY_SYNC_CONFIGMAP' },
  // Their defaults depend on the contract (contracts.ts CONTRACT_DEFAULTS).
  dataKey: { flag: 'data-key', env: 'OVERLAY_SYNC_DATA_KEY' },
  output: { flag: 'output', env: 'OVERLAY_SYNC_OUTPUT' },
  network: { flag: 'expected-network', env: 'OVERLAY_SYNC_EXPECTED_NETWORK' },
  gateway: { flag: 'expected-gateway', env: 'OVERLAY_SYNC_EXPECTED_GATEWAY' },
  expectedNamespace: { flag: 'expected-namespace', env: 'OVERLAY_SYNC_EXPECTED_NAMESPACE' },
  localSite: { flag: 'expected-local-site', env: 'OVERLAY_SYNC_EXPECTED_LOCAL_SITE' },
  maxBytes: { flag: 'max-bytes', env: 'OVERLAY_SYNC_MAX_BYTES', default: String(OVERLAY_SYNC_MAX_OVERLAY_BYTES) },
  healthAddr: { flag: 'health-addr', env: 'OVERLAY_SYNC_HEALTH_ADDR', default: '0.0.0.0:9091' },
  once: { flag: 'once', env: 'OVERLAY_SYNC_ONCE' },
  store: { flag: 'store', env: 'OVERLAY_SYNC_STORE', default: 'kubernetes' },
  stateDir: { flag: 'state', env: 'OVERLAY_SYNC_STATE_DIR' },
  manifestsDir: { flag: 'manifests', env: 'OVERLAY_SYNC_MANIFESTS_DIR' },
  kubeconfig: { flag: 'kubeconfig', env: 'KUBECONFIG' },
} as const satisfies Record<string, { flag: string; env: string; default?: string }>;

type SettingName = keyof typeof SETTINGS;

export const USAGE = `usage: overlay-sync [flags]   (every flag also reads the environment variable shown)
  --contract overlay|serving  OVERLAY_SYNC_CONTRACT (overlay): the routing overlay, or the gateway's serving config
  --namespace NS              OVERLAY_SYNC_NAMESPACE (default: --expected-namespace)
  --configmap NAME            OVERLAY_SYNC_CONFIGMAP (default: grid-overlay-{network}-{gateway}, serving: grid-serving-{network}-{gateway})
  --data-key KEY              OVERLAY_SYNC_DATA_KEY (routing-overlay.json; serving: serving-config.json)
  --output PATH               OVERLAY_SYNC_OUTPUT (/run/praxis-routing/routing-overlay.json; serving: /run/grid-serving/serving-config.json)
  --expected-network N        OVERLAY_SYNC_EXPECTED_NETWORK
  --expected-gateway G        OVERLAY_SYNC_EXPECTED_GATEWAY
  --expected-namespace NS     OVERLAY_SYNC_EXPECTED_NAMESPACE
  --expected-local-site S     OVERLAY_SYNC_EXPECTED_LOCAL_SITE
  --max-bytes N               OVERLAY_SYNC_MAX_BYTES (1048576)
  --health-addr HOST:PORT     OVERLAY_SYNC_HEALTH_ADDR (0.0.0.0:9091)
  --once                      OVERLAY_SYNC_ONCE=true: init-container mode, exit 0 after the first valid overlay
  --store kubernetes|local    OVERLAY_SYNC_STORE (kubernetes)
  --kubeconfig PATH           KUBECONFIG (kubernetes store; in a pod the service account is used)
  --state DIR                 OVERLAY_SYNC_STATE_DIR (local store: the grid's state directory, required)
  --manifests DIR             OVERLAY_SYNC_MANIFESTS_DIR (local store: manifests to import, optional)`;

const TRUE = new Set(['1', 'true', 'yes', 'on']);
const FALSE = new Set(['', '0', 'false', 'no', 'off']);

export function parseConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): OverlaySyncConfig {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: Object.fromEntries(
        Object.values(SETTINGS).map((s) => [
          s.flag,
          { type: s.flag === 'once' ? ('boolean' as const) : ('string' as const) },
        ]),
      ),
      strict: true,
      allowPositionals: false,
    });
  } catch (error) {
    throw new ConfigError(`${(error as Error).message}\n${USAGE}`);
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;

  const raw = (name: SettingName): { value: string | undefined; source: string } => {
    const setting = SETTINGS[name];
    const flagValue = values[setting.flag];
    if (typeof flagValue === 'string') return { value: flagValue, source: `--${setting.flag}` };
    const envValue = env[setting.env];
    if (envValue !== undefined && envValue !== '') return { value: envValue, source: setting.env };
    return { value: 'default' in setting ? setting.default : undefined, source: `--${setting.flag} / ${setting.env}` };
  };
  const text = (name: SettingName): string | undefined => {
    const { value, source } = raw(name);
    if (value !== undefined && value.trim() !== value)
      throw new ConfigError(`${source}: ${JSON.stringify(value)} has surrounding whitespace`);
    return value === '' ? undefined : value;
  };

  const contractText = text('contract') ?? 'overlay';
  if (!(SYNCED_CONTRACTS as readonly string[]).includes(contractText)) {
    throw new ConfigError(
      `${raw('contract').source}: ${JSON.stringify(contractText)} is not a contract; use ${SYNCED_CONTRACTS.join(' or ')}`,
    );
  }
  const contract = contractText as SyncedContract;
  const defaults = CONTRACT_DEFAULTS[contract];
  const expectedScope: Partial<OverlayScope> = {};
  const scopeFields = [
    ['network', 'network'],
    ['gateway', 'gateway'],
    ['namespace', 'expectedNamespace'],
    ['local_site', 'localSite'],
  ] as const;
  for (const [field, setting] of scopeFields) {
    const value = text(setting);
    if (value !== undefined) expectedScope[field] = value;
  }

  const namespace = text('namespace') ?? expectedScope.namespace;
  if (namespace === undefined)
    throw new ConfigError('OVERLAY_SYNC_NAMESPACE (--namespace) is required: the namespace of the overlay ConfigMap');
  let configMap = text('configMap');
  if (configMap === undefined) {
    if (expectedScope.network === undefined || expectedScope.gateway === undefined) {
      throw new ConfigError(
        'OVERLAY_SYNC_CONFIGMAP (--configmap) is required, or both OVERLAY_SYNC_EXPECTED_NETWORK and OVERLAY_SYNC_EXPECTED_GATEWAY to derive it',
      );
    }
    configMap = defaults.configMapName(expectedScope.network, expectedScope.gateway);
  }
  if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(configMap)) {
    throw new ConfigError(`${raw('configMap').source}: ${JSON.stringify(configMap)} is not a valid ConfigMap name`);
  }
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(namespace)) {
    throw new ConfigError(`${raw('namespace').source}: ${JSON.stringify(namespace)} is not a valid namespace name`);
  }
  const dataKey = text('dataKey') ?? defaults.dataKey;
  if (!/^[-._a-zA-Z0-9]{1,253}$/.test(dataKey)) {
    throw new ConfigError(`${raw('dataKey').source}: ${JSON.stringify(dataKey)} is not a valid ConfigMap data key`);
  }
  const output = text('output') ?? defaults.output;
  if (output.endsWith('/'))
    throw new ConfigError(`${raw('output').source}: ${JSON.stringify(output)} names a directory, not a file`);

  const maxBytesText = text('maxBytes') ?? String(OVERLAY_SYNC_MAX_OVERLAY_BYTES);
  const maxBytes = Number(maxBytesText);
  if (!/^\d+$/.test(maxBytesText) || !Number.isSafeInteger(maxBytes) || maxBytes < 1 || maxBytes > 16 * 1024 * 1024) {
    throw new ConfigError(
      `${raw('maxBytes').source}: ${JSON.stringify(maxBytesText)} must be an integer from 1 to 16777216 (bytes)`,
    );
  }

  const healthAddr = text('healthAddr') ?? '0.0.0.0:9091';
  try {
    parseListenAddress(healthAddr);
  } catch (error) {
    throw new ConfigError(`${raw('healthAddr').source}: ${(error as Error).message}`);
  }

  let once = values['once'] === true;
  if (!once) {
    const onceEnv = (env[SETTINGS.once.env] ?? '').trim().toLowerCase();
    if (TRUE.has(onceEnv)) once = true;
    else if (!FALSE.has(onceEnv))
      throw new ConfigError(`OVERLAY_SYNC_ONCE: ${JSON.stringify(onceEnv)} is not a boolean (true/false/1/0)`);
  }

  const backend = text('store') ?? 'kubernetes';
  let store: OverlaySyncConfig['store'];
  if (backend === 'kubernetes') {
    const kubeconfigPath = text('kubeconfig');
    store = kubeconfigPath === undefined ? { backend } : { backend, kubeconfigPath };
  } else if (backend === 'local') {
    const stateDir = text('stateDir');
    if (stateDir === undefined)
      throw new ConfigError('--store local needs --state DIR (OVERLAY_SYNC_STATE_DIR): the grid state directory');
    const manifestsDir = text('manifestsDir');
    store = manifestsDir === undefined ? { backend, stateDir } : { backend, stateDir, manifestsDir };
  } else {
    throw new ConfigError(`${raw('store').source}: ${JSON.stringify(backend)} is not a store; use kubernetes or local`);
  }

  return { contract, namespace, configMap, dataKey, output, expectedScope, maxBytes, healthAddr, once, store };
}
