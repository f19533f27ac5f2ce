/**
 * The dashboard's view of the site's data plane: admin endpoints of the consumer gateway replicas and their
 * overlay-sync sidecars, as `REPLICA/gateway=HOST:PORT` and `REPLICA/overlay-sync=HOST:PORT`, comma-separated
 * (--dashboard-targets, env GRID_DASHBOARD_TARGETS). A gateway and a sidecar with the same REPLICA run in one pod;
 * the sidecar's /status names the ConfigMap that ties the replica to its gateway's published revision.
 */
import { parseListenAddress } from '../../shared/admin-server.ts';

export type DashboardTargetKind = 'gateway' | 'overlay-sync';

export interface DashboardTarget {
  readonly replica: string;
  readonly kind: DashboardTargetKind;
  /** host:port of the admin listener. */
  readonly address: string;
}

const ENTRY = /^([A-Za-z0-9]([A-Za-z0-9._-]{0,251}[A-Za-z0-9])?)\/(gateway|overlay-sync)=(\S+)$/;
const MAX_DASHBOARD_TARGETS = 64;

/** Parses the list; throws naming `where`, the entry and the expected form. */
export function parseDashboardTargets(text: string, where: string): DashboardTarget[] {
  const entries = text
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');
  if (entries.length > MAX_DASHBOARD_TARGETS)
    throw new Error(`${where}: ${entries.length} entries, at most ${MAX_DASHBOARD_TARGETS}`);
  const seen = new Set<string>();
  return entries.map((entry) => {
    const match = ENTRY.exec(entry);
    const address = match?.[4] ?? '';
    let valid = match !== null;
    if (valid) {
      try {
        const { host, port } = parseListenAddress(address);
        valid = port > 0 && host !== '0.0.0.0';
      } catch {
        valid = false;
      }
    }
    if (!valid || match === null) {
      throw new Error(
        `${where}: "${entry.slice(0, 120)}" must be REPLICA/gateway=HOST:PORT or REPLICA/overlay-sync=HOST:PORT (e.g. consumer-0/gateway=10.0.0.5:9901)`,
      );
    }
    const key = `${match[1]}/${match[3]}`;
    if (seen.has(key)) throw new Error(`${where}: "${key}" is listed twice`);
    seen.add(key);
    return { replica: match[1]!, kind: match[3] as DashboardTargetKind, address };
  });
}
