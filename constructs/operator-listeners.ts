/**
 * The gossip-operator's opt-in listeners (daemons/gossip-operator/config.ts): the peer signals endpoint, the
 * gateway age report ingest and the SiteInvite redeem (enrollment) endpoint. Each is off unless its prop is set, so
 * an operator declared without them renders exactly what it did before. This module turns the props into the
 * daemon's environment, container ports, Service ports and (enrollment only) Secret volumes, and checks them at
 * synth so a bad port or a missing Secret name fails with one line naming the prop. Who may reach each listener
 * (the `from` and `gateways` props) is the NetworkPolicy of operator-network-policy.ts.
 */
import type { Construct } from 'constructs';
import * as kplus from 'cdk8s-plus-28';
import { issueAt, type SynthIssue } from './synth-error.ts';
import { projectedVolume } from './workload-defaults.ts';
import { sourceIssues, type GatewayAgeReporter, type ListenerSources } from './operator-network-policy.ts';
import { CERTIFICATE_LIFETIME_RULE, checkDuration, describeDurationRule } from '../schemas/durations.ts';

export interface PeerSignalsProps {
  /** @default 7950 - the peer signals endpoint (HTTPS with mTLS, GET /v1/signals; schemas/signals/README.md) */
  readonly port?: number;
  /**
   * HOST:PORT other sites poll (GRID_SIGNALS_ADVERTISE, the site record's signals_address), like
   * gossipAdvertiseAddress for SWIM: expose the port (serviceType LoadBalancer/NodePort) and put that address here.
   * @default - none; the endpoint binds 0.0.0.0, so the daemon advertises nothing (it logs a warning) and peers
   * cannot poll this site, though it still polls them
   */
  readonly advertise?: string;
  /**
   * Who may connect (the operator's NetworkPolicy).
   * @default - every source: peers poll from other sites whose addresses the site rarely knows, and the endpoint
   * admits only clients with a grid-CA certificate (mTLS)
   */
  readonly from?: ListenerSources;
}

export interface GatewayAgeIngestProps {
  /** @default 7951 - gateway ingest (plain HTTP: age and spend reports, tenant budgets; bearer token required) */
  readonly port?: number;
  /**
   * The gateway pods the operator's NetworkPolicy admits to this port; each request must also carry the ingest token.
   * GridSiteStack fills in the site's declared gateways.
   * @default - every consumer and provider gateway pod of these constructs in the operator namespace
   */
  readonly gateways?: readonly GatewayAgeReporter[];
  /**
   * Secret (operator namespace) whose key `token` is the bearer token the ingest requires and the reporting gateways
   * send; projected read-only as a directory into the operator and those gateways (never an env value). `agn pki`
   * or any 16+ printable characters make one.
   * @default 'grid-ingest-token' - GridSiteStack takes the site declaration's secrets.ingestToken
   */
  readonly tokenSecret?: string;
}

export interface EnrollmentProps {
  /** @default 9443 - the SiteInvite redeem endpoint (HTTPS) */
  readonly port?: number;
  /**
   * Secret (operator namespace) with this site's certificate `tls.crt` and key `tls.key`, which the endpoint
   * serves; the certificate must be issued by the grid CA with serverAuth. Usually the site's siteSecretRef Secret.
   */
  readonly siteCertificateSecret: string;
  /**
   * Secret (operator namespace) with the grid CA certificate `tls.crt` and its private key `tls.key` (the
   * kubernetes.io/tls shape), which sign the enrolled sites' certificates. Only the operator container mounts it.
   */
  readonly gridCaSecret: string;
  /** Lifetime of an issued site certificate, 1h..8760h in m or h. @default - the daemon's 2160h */
  readonly certificateLifetime?: string;
  /**
   * Who may connect (the operator's NetworkPolicy).
   * @default - every source: joining sites are not in the grid yet, so their addresses are unknown in advance, and
   * a redeem needs a single-use invite token
   */
  readonly from?: ListenerSources;
}

/** The props GossipOperator takes for its opt-in listeners (also carried by the site declaration). */
export interface OperatorListenerProps {
  /** Serve the peer signals endpoint (for GridNetwork signalTransport poll). @default - off */
  readonly peerSignals?: PeerSignalsProps;
  /** Accept gateway age reports. @default - off */
  readonly gatewayAgeIngest?: GatewayAgeIngestProps;
  /** Serve the SiteInvite redeem endpoint (README "Invite a site"). @default - off */
  readonly enrollment?: EnrollmentProps;
}

export const DEFAULT_SIGNALS_PORT = 7950;
export const DEFAULT_GATEWAY_AGE_PORT = 7951;
export const DEFAULT_ENROLLMENT_PORT = 9443;
/** The ingest token Secret and its key (daemons/shared/token-file.ts reads it). */
export const DEFAULT_INGEST_TOKEN_SECRET = 'grid-ingest-token';
export const INGEST_TOKEN_KEY = 'token';
/** Where the ingest token Secret is projected, in the operator and in every reporting gateway: one directory. */
export const INGEST_TOKEN_DIR = '/etc/grid/ingest-token';
export const INGEST_TOKEN_FILE = `${INGEST_TOKEN_DIR}/${INGEST_TOKEN_KEY}`;

/** The read-only projected volume of the ingest token Secret (a directory, so the kubelet swaps a rotation in). */
export function ingestTokenVolume(scope: Construct, id: string, secretName: string): kplus.Volume {
  return projectedVolume(scope, id, 'ingest-token', {
    defaultMode: 0o440,
    sources: [{ secret: { name: secretName, items: [{ key: INGEST_TOKEN_KEY, path: INGEST_TOKEN_KEY }] } }],
  });
}

/** Where the enrollment Secrets are projected: one directory per Secret, so neither shadows the other. */
export const ENROLLMENT_SITE_DIR = '/etc/grid/enrollment/site';
export const ENROLLMENT_CA_DIR = '/etc/grid/enrollment/grid-ca';

/** What the operator Deployment and Service gain from the listeners that are on. */
export interface RenderedListeners {
  readonly env: Record<string, kplus.EnvValue>;
  readonly containerPorts: kplus.ContainerPort[];
  readonly servicePorts: kplus.ServicePort[];
  readonly volumeMounts: kplus.VolumeMount[];
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/u;
const HOST_PORT = /^(?:\[[0-9a-fA-F:.]+\]|[^:\s[\]]+):(\d{1,5})$/u;

function portIssues(scope: Construct, field: string, port: number, taken: Map<number, string>): SynthIssue[] {
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    return [
      issueAt(
        scope,
        field,
        `${String(port)} is not a port`,
        'use an integer from 1 to 65535, or omit it for the default',
      ),
    ];
  }
  const owner = taken.get(port);
  if (owner !== undefined) {
    return [
      issueAt(scope, field, `port ${port} is already the operator's ${owner} port`, `give ${field} a port of its own`),
    ];
  }
  taken.set(port, field);
  return [];
}

/**
 * The synth-time problems of the listener props. `taken` holds the ports the operator already uses (SWIM, admin),
 * named for the message; each listener's port is added as it is checked, so two listeners cannot share one either.
 */
export function listenerIssues(
  scope: Construct,
  props: OperatorListenerProps,
  taken: Map<number, string>,
): SynthIssue[] {
  const issues: SynthIssue[] = [];
  if (props.peerSignals !== undefined) {
    issues.push(...portIssues(scope, 'peerSignals.port', props.peerSignals.port ?? DEFAULT_SIGNALS_PORT, taken));
    const advertise = props.peerSignals.advertise;
    const match = advertise === undefined ? null : HOST_PORT.exec(advertise);
    if (advertise !== undefined && (match === null || Number(match[1]) < 1 || Number(match[1]) > 65535)) {
      issues.push(
        issueAt(
          scope,
          'peerSignals.advertise',
          `"${advertise.slice(0, 80)}" is not HOST:PORT`,
          'set the host:port other sites reach the signals port at, e.g. signals.east.example.com:7950',
        ),
      );
    }
  }
  if (props.gatewayAgeIngest !== undefined) {
    issues.push(
      ...portIssues(scope, 'gatewayAgeIngest.port', props.gatewayAgeIngest.port ?? DEFAULT_GATEWAY_AGE_PORT, taken),
    );
    const secret = props.gatewayAgeIngest.tokenSecret;
    if (secret !== undefined && !DNS_SUBDOMAIN.test(secret)) {
      issues.push(
        issueAt(
          scope,
          'gatewayAgeIngest.tokenSecret',
          `"${secret.slice(0, 80)}" is not a Secret name`,
          `use a DNS-1123 subdomain (lowercase letters, digits, - and .), or omit it for ${DEFAULT_INGEST_TOKEN_SECRET}`,
        ),
      );
    }
  }
  const enrollment = props.enrollment;
  if (enrollment !== undefined) {
    issues.push(...portIssues(scope, 'enrollment.port', enrollment.port ?? DEFAULT_ENROLLMENT_PORT, taken));
    const secrets = [
      [
        'enrollment.siteCertificateSecret',
        enrollment.siteCertificateSecret,
        "this site's certificate and key (tls.crt, tls.key)",
      ],
      [
        'enrollment.gridCaSecret',
        enrollment.gridCaSecret,
        'the grid CA certificate and private key (tls.crt, tls.key)',
      ],
    ] as const;
    for (const [field, name, holds] of secrets) {
      if (typeof name !== 'string' || name.trim() === '') {
        issues.push(
          issueAt(scope, field, 'no Secret name', `name the Secret in the operator namespace that holds ${holds}`),
        );
      } else if (!DNS_SUBDOMAIN.test(name)) {
        issues.push(
          issueAt(
            scope,
            field,
            `"${name.slice(0, 80)}" is not a Secret name`,
            'use a DNS-1123 subdomain (lowercase letters, digits, - and .)',
          ),
        );
      }
    }
    if (enrollment.siteCertificateSecret === enrollment.gridCaSecret && enrollment.gridCaSecret !== '') {
      issues.push(
        issueAt(
          scope,
          'enrollment.gridCaSecret',
          `${enrollment.gridCaSecret} is also the siteCertificateSecret`,
          'keep the grid CA key in a Secret of its own; both hold tls.crt and tls.key',
        ),
      );
    }
    const lifetime = enrollment.certificateLifetime;
    if (lifetime !== undefined) {
      // The daemon's own rule for --enrollment-cert-lifetime, so synth refuses what the operator would refuse at start.
      const checked = checkDuration('enrollment.certificateLifetime', lifetime, CERTIFICATE_LIFETIME_RULE);
      if (!checked.ok) {
        issues.push(
          issueAt(
            scope,
            'enrollment.certificateLifetime',
            checked.fault,
            `use ${describeDurationRule(CERTIFICATE_LIFETIME_RULE)}, or omit it for the daemon default`,
          ),
        );
      }
    }
  }
  issues.push(...sourceIssues(scope, props));
  return issues;
}

/** Builds the env, ports and mounts of the listeners that are on (call after listenerIssues found nothing). */
export function renderListeners(scope: Construct, props: OperatorListenerProps): RenderedListeners {
  const env: Record<string, kplus.EnvValue> = {};
  const containerPorts: kplus.ContainerPort[] = [];
  const servicePorts: kplus.ServicePort[] = [];
  const volumeMounts: kplus.VolumeMount[] = [];
  const listen = (name: string, port: number): string => {
    containerPorts.push({ number: port, name });
    servicePorts.push({ name, port, targetPort: port });
    return `0.0.0.0:${port}`;
  };
  if (props.peerSignals !== undefined) {
    // Peers of other sites poll it, like the SWIM port: it goes on the same Service (serviceType decides exposure).
    env['GRID_SIGNALS_ADDRESS'] = kplus.EnvValue.fromValue(
      listen('signals', props.peerSignals.port ?? DEFAULT_SIGNALS_PORT),
    );
    if (props.peerSignals.advertise !== undefined)
      env['GRID_SIGNALS_ADVERTISE'] = kplus.EnvValue.fromValue(props.peerSignals.advertise);
  }
  if (props.gatewayAgeIngest !== undefined) {
    // A port of its own so the operator's NetworkPolicy (operator-network-policy.ts) can open it to the site's
    // gateway pods only; the port is on the Service for in-cluster gateways.
    env['GRID_GATEWAY_AGE_ADDRESS'] = kplus.EnvValue.fromValue(
      listen('gateway-age', props.gatewayAgeIngest.port ?? DEFAULT_GATEWAY_AGE_PORT),
    );
    // The bearer token every ingest request must carry: a directory mount (never subPath), re-read on rotation.
    const token = ingestTokenVolume(
      scope,
      'IngestToken',
      props.gatewayAgeIngest.tokenSecret ?? DEFAULT_INGEST_TOKEN_SECRET,
    );
    volumeMounts.push({ path: INGEST_TOKEN_DIR, volume: token, readOnly: true });
    env['GRID_INGEST_TOKEN_FILE'] = kplus.EnvValue.fromValue(INGEST_TOKEN_FILE);
  }
  const enrollment = props.enrollment;
  if (enrollment !== undefined) {
    env['GRID_ENROLLMENT_ADDRESS'] = kplus.EnvValue.fromValue(
      listen('enrollment', enrollment.port ?? DEFAULT_ENROLLMENT_PORT),
    );
    // Directory mounts of projected volumes, never subPath: the kubelet then swaps rotated Secrets in, and the
    // daemon follows the files on disk. Only tls.crt and tls.key are projected; 0440 with the pod's fsGroup.
    const keys = [
      { key: 'tls.crt', path: 'tls.crt' },
      { key: 'tls.key', path: 'tls.key' },
    ];
    const site = projectedVolume(scope, 'EnrollmentSiteCertificate', 'enrollment-site-certificate', {
      defaultMode: 0o440,
      sources: [{ secret: { name: enrollment.siteCertificateSecret, items: keys } }],
    });
    const ca = projectedVolume(scope, 'EnrollmentGridCa', 'enrollment-grid-ca', {
      defaultMode: 0o440,
      sources: [{ secret: { name: enrollment.gridCaSecret, items: keys } }],
    });
    volumeMounts.push(
      { path: ENROLLMENT_SITE_DIR, volume: site, readOnly: true },
      { path: ENROLLMENT_CA_DIR, volume: ca, readOnly: true },
    );
    env['GRID_ENROLLMENT_TLS_CERT'] = kplus.EnvValue.fromValue(`${ENROLLMENT_SITE_DIR}/tls.crt`);
    env['GRID_ENROLLMENT_TLS_KEY'] = kplus.EnvValue.fromValue(`${ENROLLMENT_SITE_DIR}/tls.key`);
    env['GRID_CA_CERT'] = kplus.EnvValue.fromValue(`${ENROLLMENT_CA_DIR}/tls.crt`);
    env['GRID_CA_KEY'] = kplus.EnvValue.fromValue(`${ENROLLMENT_CA_DIR}/tls.key`);
    if (enrollment.certificateLifetime !== undefined)
      env['GRID_ENROLLMENT_CERT_LIFETIME'] = kplus.EnvValue.fromValue(enrollment.certificateLifetime);
  }
  return { env, containerPorts, servicePorts, volumeMounts };
}
