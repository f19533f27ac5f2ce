/**
 * Operator configuration from flags and environment (flags win). Parsed and validated once at start; every error
 * names the flag or variable and what is expected. The SWIM key is taken only from the environment (a flag would
 * show up in the process list) and never appears in the returned errors.
 */
import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { parseListenAddress } from '../shared/admin-server.ts';
import { parseHexKey } from './swim/keyring.ts';
import {
  ENROLLMENT_OPTIONS,
  ENROLLMENT_USAGE,
  type EnrollmentConfig,
  parseEnrollmentConfig,
} from './enrollment/config.ts';
import { checkDuration, type DurationRule } from '../../schemas/durations.ts';
import { type DashboardTarget, parseDashboardTargets } from './dashboard/targets.ts';

export interface OperatorConfig {
  readonly store:
    | { readonly backend: 'kubernetes' }
    | { readonly backend: 'local'; readonly manifestsDir?: string; readonly stateDir: string };
  /** This site's name: the SWIM member name and the site id of its CRDT records. */
  readonly site: string;
  /** Namespace of the Lease and the operator's own state ConfigMap. */
  readonly namespace: string;
  readonly identity: string;
  readonly gossipBind: { readonly host: string; readonly port: number };
  readonly gossipAdvertise?: string;
  readonly seeds: readonly string[];
  /** GRID_SWIM_ENCRYPT_KEY (64 hex), used when the GridNetwork names no Secret. */
  readonly swimKey?: Buffer;
  readonly gatewayAddress: string;
  readonly adminAddress: string;
  readonly swimProfile: 'wan' | 'loopback';
  readonly leaderElection: boolean;
  readonly leaseDurationMs: number;
  /** The Lease in `namespace` (default gossip-operator-leader, the name the constructs' Role grants). */
  readonly leaseName: string;
  readonly sitePollIntervalMs: number;
  readonly providerPollIntervalMs: number;
  readonly modelDiscoveryIntervalMs: number;
  readonly modelDiscoveryTtlMs: number;
  /** How long after start no auto-discovered site is judged absent (a restart never starts GC clocks). */
  readonly discoveryVerificationWindowMs: number;
  readonly logLevel: string;
  /** Peer signals endpoint (mTLS) listen address; absent: this site serves no signals to pollers. */
  readonly signalsAddress?: string;
  /** Address peers dial for it (site record signals_address); default: the bound address unless a wildcard. */
  readonly signalsAdvertise?: string;
  /** Gateway ingest listen address (plain HTTP: age and spend reports, budgets); absent: ingest is off. */
  readonly gatewayAgeAddress?: string;
  /** The file holding the bearer token the ingest requires (always set with gatewayAgeAddress). */
  readonly ingestTokenFile?: string;
  /** How often the peer poller polls under signalTransport poll. */
  readonly peerPollIntervalMs?: number;
  /**
   * The scraper ServiceAccount in `namespace` whose token metricsConfig.auth sends; parseConfig always sets it. Absent
   * (in-process tests only): such scrapes fail with `auth`.
   */
  readonly metricsScraperServiceAccount?: string;
  /** The SiteInvite redeem endpoint; absent (the default) serves nothing. */
  readonly enrollment?: EnrollmentConfig;
  /**
   * Who may open the fleet dashboard on the admin listener (the page, its events and model.json; never /livez,
   * /readyz or /metrics). Default: open when the admin listener binds a loopback address, else off.
   */
  readonly dashboard: DashboardAccessConfig;
  /**
   * Gateway and overlay-sync admin endpoints the dashboard reads (accepted/serving revisions, delivery health).
   * Empty: with the kubernetes store the operator discovers the site's consumer gateway pods itself.
   */
  readonly dashboardTargets: readonly DashboardTarget[];
}

export type DashboardAccessConfig =
  | { readonly access: 'off' }
  | { readonly access: 'open' }
  | { readonly access: 'token'; readonly tokenFile: string };

/** Whether `host` (of a listen address) is reachable from this machine only. */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

const OPTIONS = {
  store: { type: 'string' },
  manifests: { type: 'string' },
  state: { type: 'string' },
  site: { type: 'string' },
  namespace: { type: 'string' },
  identity: { type: 'string' },
  'gossip-bind': { type: 'string' },
  'gossip-advertise': { type: 'string' },
  seeds: { type: 'string' },
  'gateway-address': { type: 'string' },
  admin: { type: 'string' },
  'swim-profile': { type: 'string' },
  'leader-elect': { type: 'string' },
  'lease-duration': { type: 'string' },
  'lease-name': { type: 'string' },
  'site-poll-interval': { type: 'string' },
  'provider-poll-interval': { type: 'string' },
  'model-discovery-interval': { type: 'string' },
  'model-discovery-ttl': { type: 'string' },
  'discovery-verification-window': { type: 'string' },
  'log-level': { type: 'string' },
  'signals-address': { type: 'string' },
  'signals-advertise': { type: 'string' },
  'gateway-age-address': { type: 'string' },
  'ingest-token-file': { type: 'string' },
  'peer-poll-interval': { type: 'string' },
  'metrics-scraper-service-account': { type: 'string' },
  'dashboard-targets': { type: 'string' },
  dashboard: { type: 'string' },
  'dashboard-token-file': { type: 'string' },
  ...ENROLLMENT_OPTIONS,
  help: { type: 'boolean' },
} as const;

export const USAGE = `Usage: node daemons/gossip-operator/main.ts [flags]
  --store kubernetes|local        resource store (default kubernetes; env GRID_STORE)
  --manifests DIR --state DIR     local store: manifest directory (e.g. dist/) and state directory
  --site NAME                     this site's name (env GRID_SITE_NAME; required)
  --namespace NS                  namespace of the Lease and operator state (env GRID_OPERATOR_NAMESPACE; default grid-system)
  --gossip-bind HOST:PORT         SWIM bind address (env GRID_GOSSIP_BIND; default 0.0.0.0:7946)
  --gossip-advertise HOST:PORT    address peers use (env GRID_GOSSIP_ADVERTISE)
  --seeds A,B                     extra SWIM seeds besides GridNetwork spec.seeds (env GRID_SWIM_SEEDS)
  --gateway-address HOST:PORT     this site's gateway, advertised to peers (env GRID_GATEWAY_ADDRESS)
  --admin HOST:PORT               /livez /readyz /metrics /dashboard/ (env GRID_ADMIN_ADDRESS; default 0.0.0.0:9090)
  --dashboard off|open|token      who may open the fleet dashboard under /dashboard/ (env GRID_DASHBOARD; default
                                  open when --admin binds a loopback address, else off); /livez /readyz /metrics
                                  are always served
  --dashboard-token-file FILE     the token of --dashboard token: requests send Authorization: Bearer TOKEN, or a
                                  browser opens /dashboard/?token=TOKEN once for a session cookie; re-read when
                                  the file changes (env GRID_DASHBOARD_TOKEN_FILE)
  --dashboard-targets LIST        admin endpoints the dashboard reads: REPLICA/gateway=HOST:PORT and
                                  REPLICA/overlay-sync=HOST:PORT, comma-separated (env GRID_DASHBOARD_TARGETS);
                                  default with --store kubernetes: the consumer gateway pods of --namespace
  --swim-profile wan|loopback     SWIM timing profile (env GRID_SWIM_PROFILE; default wan)
  --leader-elect true|false       wait on the Lease before reconciling (default true)
  --lease-name NAME               Lease name (env GRID_LEASE_NAME; default gossip-operator-leader)
  --signals-address HOST:PORT     peer signals endpoint over mTLS, for signalTransport poll (env GRID_SIGNALS_ADDRESS; off when unset)
  --signals-advertise HOST:PORT   address peers poll (env GRID_SIGNALS_ADVERTISE; default the bound address)
  --gateway-age-address HOST:PORT gateway ingest (age and spend reports, budgets), plain HTTP with a bearer token
                                  (env GRID_GATEWAY_AGE_ADDRESS; off when unset; needs --ingest-token-file)
  --ingest-token-file PATH        the token the ingest requires, re-read when the file changes (env
                                  GRID_INGEST_TOKEN_FILE; the Secret grid-ingest-token, key token, mounted as a directory)
  --peer-poll-interval DURATION   peer signals poll interval (env GRID_PEER_POLL_INTERVAL; default 10s)
  --metrics-scraper-service-account NAME
                                  ServiceAccount in --namespace whose token metricsConfig.auth sends
                                  (env GRID_METRICS_SCRAPER_SERVICE_ACCOUNT; default gossip-operator-metrics-scraper)
  env GRID_SWIM_ENCRYPT_KEY       64 hex characters; used when the GridNetwork names no swimKeySecretRef
${ENROLLMENT_USAGE}`;

/** Interval and lease flags: any unit of the grid's duration syntax, positive; each consumer bounds its own use. */
export const FLAG_DURATION_RULE: DurationRule = { units: ['ms', 's', 'm', 'h'], minMs: 1, example: '30s' };

function durationMs(text: string, where: string): number {
  const checked = checkDuration(where, text, FLAG_DURATION_RULE);
  if (!checked.ok) throw new ConfigError(checked.message);
  return checked.ms;
}

const SITE_NAME = /^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/;

export function parseConfig(argv: readonly string[], env: NodeJS.ProcessEnv): OperatorConfig {
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({ args: [...argv], options: OPTIONS, strict: true, allowPositionals: false }).values;
  } catch (error) {
    throw new ConfigError(`${(error as Error).message}\n${USAGE}`);
  }
  if (values['help'] === true) throw new ConfigError(USAGE);
  const pick = (flag: keyof typeof OPTIONS, variable: string): string | undefined => {
    const value = values[flag] ?? env[variable];
    return typeof value === 'string' && value.trim() !== '' ? value.trim() : undefined;
  };
  const flagOrEnv = (flag: keyof typeof OPTIONS, variable: string) => `--${flag} (env ${variable})`;

  const backend = pick('store', 'GRID_STORE') ?? 'kubernetes';
  let store: OperatorConfig['store'];
  if (backend === 'local') {
    const stateDir = pick('state', 'GRID_STATE_DIR');
    if (stateDir === undefined) throw new ConfigError('--store local needs --state DIR (the shared state directory)');
    const manifestsDir = pick('manifests', 'GRID_MANIFESTS_DIR');
    store = { backend: 'local', stateDir, ...(manifestsDir !== undefined ? { manifestsDir } : {}) };
  } else if (backend === 'kubernetes') {
    store = { backend: 'kubernetes' };
  } else {
    throw new ConfigError(`${flagOrEnv('store', 'GRID_STORE')}: "${backend.slice(0, 40)}" must be kubernetes or local`);
  }

  const site = pick('site', 'GRID_SITE_NAME');
  if (site === undefined)
    throw new ConfigError(`${flagOrEnv('site', 'GRID_SITE_NAME')} is required: the name of this site`);
  if (!SITE_NAME.test(site))
    throw new ConfigError(
      `${flagOrEnv('site', 'GRID_SITE_NAME')}: "${site.slice(0, 80)}" must be 1-63 letters, digits, '.', '_' or '-'`,
    );

  const bindText = pick('gossip-bind', 'GRID_GOSSIP_BIND') ?? '0.0.0.0:7946';
  let gossipBind: { host: string; port: number };
  try {
    gossipBind = parseListenAddress(bindText);
  } catch {
    throw new ConfigError(
      `${flagOrEnv('gossip-bind', 'GRID_GOSSIP_BIND')}: "${bindText.slice(0, 80)}" must be IP:PORT`,
    );
  }

  const adminAddress = pick('admin', 'GRID_ADMIN_ADDRESS') ?? '0.0.0.0:9090';
  try {
    parseListenAddress(adminAddress);
  } catch {
    throw new ConfigError(
      `${flagOrEnv('admin', 'GRID_ADMIN_ADDRESS')}: "${adminAddress.slice(0, 80)}" must be HOST:PORT`,
    );
  }

  const keyText = env['GRID_SWIM_ENCRYPT_KEY'];
  let swimKey: Buffer | undefined;
  if (keyText !== undefined && keyText.trim() !== '') {
    try {
      swimKey = parseHexKey(keyText, 'GRID_SWIM_ENCRYPT_KEY');
    } catch (error) {
      throw new ConfigError((error as Error).message);
    }
  }

  const profile = pick('swim-profile', 'GRID_SWIM_PROFILE') ?? 'wan';
  if (profile !== 'wan' && profile !== 'loopback')
    throw new ConfigError(`${flagOrEnv('swim-profile', 'GRID_SWIM_PROFILE')}: must be wan or loopback`);
  const leaderText = pick('leader-elect', 'GRID_LEADER_ELECT') ?? 'true';
  if (leaderText !== 'true' && leaderText !== 'false')
    throw new ConfigError(`${flagOrEnv('leader-elect', 'GRID_LEADER_ELECT')}: must be true or false`);
  const duration = (flag: keyof typeof OPTIONS, variable: string, fallback: string) =>
    durationMs(pick(flag, variable) ?? fallback, flagOrEnv(flag, variable));

  const listen = (flag: keyof typeof OPTIONS, variable: string): string | undefined => {
    const text = pick(flag, variable);
    if (text === undefined) return undefined;
    try {
      parseListenAddress(text);
    } catch {
      throw new ConfigError(`${flagOrEnv(flag, variable)}: "${text.slice(0, 80)}" must be HOST:PORT`);
    }
    return text;
  };
  const signalsAddress = listen('signals-address', 'GRID_SIGNALS_ADDRESS');
  const signalsAdvertise = listen('signals-advertise', 'GRID_SIGNALS_ADVERTISE');
  const gatewayAgeAddress = listen('gateway-age-address', 'GRID_GATEWAY_AGE_ADDRESS');
  const ingestTokenFile = pick('ingest-token-file', 'GRID_INGEST_TOKEN_FILE');
  // An unauthenticated ingest would let any pod past the NetworkPolicy write spend into status: no such mode.
  if (gatewayAgeAddress !== undefined && (ingestTokenFile === undefined || ingestTokenFile.trim() === '')) {
    throw new ConfigError(
      `${flagOrEnv('gateway-age-address', 'GRID_GATEWAY_AGE_ADDRESS')} needs ${flagOrEnv('ingest-token-file', 'GRID_INGEST_TOKEN_FILE')}: the file holding the bearer token the site's gateways send (Secret grid-ingest-token, key token)`,
    );
  }
  if (gatewayAgeAddress === undefined && ingestTokenFile !== undefined) {
    throw new ConfigError(
      `${flagOrEnv('ingest-token-file', 'GRID_INGEST_TOKEN_FILE')} is set but ${flagOrEnv('gateway-age-address', 'GRID_GATEWAY_AGE_ADDRESS')} is not: set both to serve the gateway ingest, or neither`,
    );
  }
  const seeds = (pick('seeds', 'GRID_SWIM_SEEDS') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const advertise = pick('gossip-advertise', 'GRID_GOSSIP_ADVERTISE');
  const scraper =
    pick('metrics-scraper-service-account', 'GRID_METRICS_SCRAPER_SERVICE_ACCOUNT') ??
    'gossip-operator-metrics-scraper';
  if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(scraper)) {
    throw new ConfigError(
      `${flagOrEnv('metrics-scraper-service-account', 'GRID_METRICS_SCRAPER_SERVICE_ACCOUNT')}: "${scraper.slice(0, 80)}" is not a ServiceAccount name (DNS-1123 subdomain)`,
    );
  }
  let dashboardTargets: DashboardTarget[];
  try {
    dashboardTargets = parseDashboardTargets(
      pick('dashboard-targets', 'GRID_DASHBOARD_TARGETS') ?? '',
      flagOrEnv('dashboard-targets', 'GRID_DASHBOARD_TARGETS'),
    );
  } catch (error) {
    throw new ConfigError((error as Error).message);
  }
  const dashboard = dashboardAccess(
    pick('dashboard', 'GRID_DASHBOARD'),
    pick('dashboard-token-file', 'GRID_DASHBOARD_TOKEN_FILE'),
    parseListenAddress(adminAddress).host,
  );
  let enrollment: EnrollmentConfig | undefined;
  try {
    enrollment = parseEnrollmentConfig(pick);
  } catch (error) {
    throw new ConfigError((error as Error).message);
  }
  return {
    store,
    site,
    namespace: pick('namespace', 'GRID_OPERATOR_NAMESPACE') ?? 'grid-system',
    identity: pick('identity', 'POD_NAME') ?? `${hostname()}-${process.pid}`,
    gossipBind,
    ...(advertise !== undefined ? { gossipAdvertise: advertise } : {}),
    seeds,
    ...(swimKey !== undefined ? { swimKey } : {}),
    gatewayAddress: pick('gateway-address', 'GRID_GATEWAY_ADDRESS') ?? '',
    adminAddress,
    swimProfile: profile,
    leaderElection: leaderText === 'true',
    leaseDurationMs: duration('lease-duration', 'GRID_LEASE_DURATION', '15s'),
    leaseName: pick('lease-name', 'GRID_LEASE_NAME') ?? 'gossip-operator-leader',
    sitePollIntervalMs: duration('site-poll-interval', 'GRID_SITE_POLL_INTERVAL', '30s'),
    providerPollIntervalMs: duration('provider-poll-interval', 'GRID_PROVIDER_POLL_INTERVAL', '30s'),
    modelDiscoveryIntervalMs: duration('model-discovery-interval', 'GRID_MODEL_DISCOVERY_INTERVAL', '60s'),
    modelDiscoveryTtlMs: duration('model-discovery-ttl', 'GRID_MODEL_DISCOVERY_TTL', '5m'),
    discoveryVerificationWindowMs: duration(
      'discovery-verification-window',
      'GRID_DISCOVERY_VERIFICATION_WINDOW',
      '11m',
    ),
    logLevel: pick('log-level', 'LOG_LEVEL') ?? 'info',
    ...(signalsAddress !== undefined ? { signalsAddress } : {}),
    ...(signalsAdvertise !== undefined ? { signalsAdvertise } : {}),
    ...(gatewayAgeAddress !== undefined && ingestTokenFile !== undefined ? { gatewayAgeAddress, ingestTokenFile } : {}),
    peerPollIntervalMs: duration('peer-poll-interval', 'GRID_PEER_POLL_INTERVAL', '10s'),
    metricsScraperServiceAccount: scraper,
    ...(enrollment !== undefined ? { enrollment } : {}),
    dashboard,
    dashboardTargets,
  };
}

function dashboardAccess(
  mode: string | undefined,
  tokenFile: string | undefined,
  adminHost: string,
): DashboardAccessConfig {
  const where = '--dashboard (env GRID_DASHBOARD)';
  if (mode !== undefined && mode !== 'off' && mode !== 'open' && mode !== 'token') {
    throw new ConfigError(`${where}: "${mode.slice(0, 40)}" must be off, open or token`);
  }
  if (mode === 'token') {
    if (tokenFile === undefined)
      throw new ConfigError(
        `${where}: token needs --dashboard-token-file FILE (env GRID_DASHBOARD_TOKEN_FILE), the file holding the token`,
      );
    return { access: 'token', tokenFile };
  }
  if (tokenFile !== undefined) {
    // A token file without token access would read as protection that is not there.
    throw new ConfigError(
      `--dashboard-token-file (env GRID_DASHBOARD_TOKEN_FILE) is read only with --dashboard token; set ${where} to token`,
    );
  }
  return { access: mode ?? (isLoopbackHost(adminHost) ? 'open' : 'off') };
}
