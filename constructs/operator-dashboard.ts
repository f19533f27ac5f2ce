/**
 * The fleet dashboard's access on the operator (daemons/gossip-operator --dashboard): nothing rendered by default,
 * which the operator reads as off on its public admin bind; `off` said explicitly (also honoured by the local grid,
 * where the loopback bind would otherwise open it); `token` with the token Secret projected as a directory, never a
 * subPath, so the kubelet's swap of a rotated Secret reaches the file the operator follows.
 */
import type { Construct } from 'constructs';
import * as kplus from 'cdk8s-plus-28';
import { issueAt, type SynthIssue } from './synth-error.ts';
import { projectedVolume } from './workload-defaults.ts';

/** The Secret `agn pki` generates for the dashboard, in the site namespace. */
export const DEFAULT_DASHBOARD_TOKEN_SECRET = 'grid-dashboard-token';
export const DASHBOARD_TOKEN_KEY = 'token';
export const DASHBOARD_TOKEN_DIR = '/etc/grid/dashboard-token';

export type OperatorDashboardProps =
  | { readonly access: 'off' }
  | {
      readonly access: 'token';
      /** The Secret in the operator namespace holding the token under key `token`. @default 'grid-dashboard-token' */
      readonly tokenSecret?: string;
    };

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/u;

export function dashboardIssues(scope: Construct, dashboard: OperatorDashboardProps | undefined): SynthIssue[] {
  if (dashboard === undefined) return [];
  const access: unknown = dashboard.access;
  if (access !== 'off' && access !== 'token') {
    return [
      issueAt(
        scope,
        'dashboard.access',
        `${JSON.stringify(access)?.slice(0, 40)} is not a dashboard access of a cluster`,
        "use 'token' (a bearer token or session cookie from the token Secret) or 'off'; an open dashboard on the admin port would show tenant spend to every pod that reaches it",
      ),
    ];
  }
  const secret = dashboard.access === 'token' ? dashboard.tokenSecret : undefined;
  if (secret !== undefined && !DNS_SUBDOMAIN.test(secret)) {
    return [
      issueAt(
        scope,
        'dashboard.tokenSecret',
        `"${String(secret).slice(0, 80)}" is not a Secret name`,
        `use a DNS-1123 subdomain, or omit it for ${DEFAULT_DASHBOARD_TOKEN_SECRET}`,
      ),
    ];
  }
  return [];
}

export interface RenderedDashboard {
  readonly env: Record<string, kplus.EnvValue>;
  readonly volumeMounts: kplus.VolumeMount[];
}

/** The env and mounts of the declared access (call after dashboardIssues found nothing). */
export function renderDashboard(scope: Construct, dashboard: OperatorDashboardProps | undefined): RenderedDashboard {
  if (dashboard === undefined) return { env: {}, volumeMounts: [] };
  if (dashboard.access === 'off') return { env: { GRID_DASHBOARD: kplus.EnvValue.fromValue('off') }, volumeMounts: [] };
  const volume = projectedVolume(scope, 'DashboardToken', 'dashboard-token', {
    defaultMode: 0o440,
    sources: [
      {
        secret: {
          name: dashboard.tokenSecret ?? DEFAULT_DASHBOARD_TOKEN_SECRET,
          items: [{ key: DASHBOARD_TOKEN_KEY, path: DASHBOARD_TOKEN_KEY }],
        },
      },
    ],
  });
  return {
    env: {
      GRID_DASHBOARD: kplus.EnvValue.fromValue('token'),
      GRID_DASHBOARD_TOKEN_FILE: kplus.EnvValue.fromValue(`${DASHBOARD_TOKEN_DIR}/${DASHBOARD_TOKEN_KEY}`),
    },
    volumeMounts: [{ path: DASHBOARD_TOKEN_DIR, volume, readOnly: true }],
  };
}
