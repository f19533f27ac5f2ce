/**
 * The site name ledger (SiteInvite spec.allowDeletedName): one ConfigMap in the operator namespace whose keys are
 * the site names this operator has seen a GridSite for, each with the time it was first seen. A recorded name with
 * no GridSite now is a deleted site: its certificate identity, CRDT records, gossip member name and overlay history
 * live on elsewhere in the grid, so a new site must not take the name silently.
 *
 * Names are recorded when they are used (a GridSite exists), not when a deletion is observed, so a GridSite deleted
 * while no operator runs is still caught on the next start, and no finalizer ever holds a deletion hostage to the
 * operator being up. The record is written with a resourceVersion precondition and retried on conflict, so a
 * standby taking over mid-write loses nothing; the redeem endpoint (served by every replica) only reads it.
 */
import { ResourceStoreError } from '../shared/resource-store/errors.ts';
import type { KubeObject, ObjectRef, ResourceStore } from '../shared/resource-store/types.ts';
import { CONFIG_MAP, FIELD_MANAGER, GRID_SITE, MANAGED_BY, siteIdOf } from './kinds.ts';
import { nowRfc3339 } from './controllers/status.ts';

const SITE_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;
/** Read-apply rounds: each conflict means another writer got its write in, so few rounds are ever needed. */
const RECORD_ATTEMPTS = 8;
/**
 * Creates the empty ledger. Its own field manager applies no `data`, so it can never remove a name: the same
 * manager as the writes would, on the API server, prune every key its apply leaves out.
 */
const LEDGER_CREATE_MANAGER = `${FIELD_MANAGER}-site-name-ledger`;

export interface SiteNameLedger {
  /** Recorded site name → when a GridSite of that name was first seen (undefined when the value is malformed). */
  readonly names: ReadonlyMap<string, string | undefined>;
  /** Every entry as stored, including ones ignored for matching, so a rewrite never drops what it cannot read. */
  readonly raw: Readonly<Record<string, string>>;
  /** One line per malformed part, naming the ConfigMap and key: logged, never fatal. */
  readonly problems: readonly string[];
  readonly resourceVersion: string | undefined;
}

/** `ConfigMap grid-system/grid-site-names-site-a`: how messages name the ledger. */
export function describeLedger(ref: ObjectRef): string {
  return `ConfigMap ${ref.namespace ?? ''}/${ref.name}`;
}

/**
 * Pure: the ledger in `object` (undefined: nothing recorded yet). A malformed part is reported and skipped, never
 * thrown: a key that is not a site name cannot match an invite, and a key with a bad time still records its name
 * (the key, not the time, is the fact the check needs).
 */
export function parseSiteNameLedger(object: KubeObject | undefined, ref: ObjectRef): SiteNameLedger {
  const names = new Map<string, string | undefined>();
  const raw: Record<string, string> = {};
  const problems: string[] = [];
  const where = describeLedger(ref);
  const data = object?.['data'];
  if (data !== undefined && (typeof data !== 'object' || data === null || Array.isArray(data))) {
    problems.push(`${where}: data is not a map of site names to times; no name is read from it`);
  } else if (data !== undefined) {
    for (const [key, value] of Object.entries(data as Record<string, unknown>)) {
      if (typeof value !== 'string') {
        problems.push(
          `${where} key "${key.slice(0, 63)}": the value is not a string; the name is still treated as recorded`,
        );
      } else raw[key] = value;
      if (key.length > 63 || !SITE_NAME.test(key)) {
        problems.push(
          `${where} key "${key.slice(0, 63)}": not a site name (a DNS label: 1-63 lowercase letters, digits or -); ignored`,
        );
        continue;
      }
      const valid = typeof value === 'string' && RFC3339.test(value) && Number.isFinite(Date.parse(value));
      if (typeof value === 'string' && !valid)
        problems.push(
          `${where} key "${key}": "${value.slice(0, 40)}" is not an RFC 3339 time; the name is still treated as recorded`,
        );
      names.set(key, valid ? value : undefined);
    }
  }
  return { names, raw, problems, resourceVersion: object?.metadata.resourceVersion };
}

export async function readSiteNameLedger(store: ResourceStore, ref: ObjectRef): Promise<SiteNameLedger> {
  return parseSiteNameLedger(await store.get(CONFIG_MAP, ref), ref);
}

/**
 * Adds `names` (first seen at `nowMs`) to the ledger unless already there. The whole map is applied with the
 * read's resourceVersion as precondition (server-side apply by one field manager replaces the map it owns), and a
 * conflict re-reads, so an entry another writer added in between is kept. Resolves to the names it added.
 */
export async function recordSiteNames(
  store: ResourceStore,
  ref: ObjectRef,
  names: readonly string[],
  nowMs: number,
): Promise<string[]> {
  for (let attempt = 1; ; attempt++) {
    const ledger = await readSiteNameLedger(store, ref);
    // hasOwn, not `in`: a site may be named after an Object.prototype member (`constructor` is a valid DNS label).
    const added = names.filter((n) => !ledger.names.has(n) && !Object.hasOwn(ledger.raw, n));
    if (added.length === 0) return [];
    const metadata = { name: ref.name, namespace: ref.namespace, labels: { [MANAGED_BY]: FIELD_MANAGER } };
    if (ledger.resourceVersion === undefined) {
      // A write needs a resourceVersion to be conditional, and an absent object has none: writers racing on the
      // first name would each replace the others' maps. So the ledger is created empty first, then written.
      await store.apply(
        CONFIG_MAP,
        { apiVersion: 'v1', kind: 'ConfigMap', metadata },
        { fieldManager: LEDGER_CREATE_MANAGER },
      );
      if (attempt >= RECORD_ATTEMPTS)
        throw new Error(`${describeLedger(ref)}: created, but still not readable after ${attempt} attempts`);
      continue;
    }
    const firstSeen = nowRfc3339(nowMs);
    const data: Record<string, string> = { ...ledger.raw };
    for (const name of added) data[name] = firstSeen;
    try {
      await store.apply(
        CONFIG_MAP,
        { apiVersion: 'v1', kind: 'ConfigMap', metadata, data },
        { fieldManager: FIELD_MANAGER, force: true, resourceVersion: ledger.resourceVersion },
      );
      return added;
    } catch (error) {
      if (!(error instanceof ResourceStoreError) || error.code !== 'conflict' || attempt >= RECORD_ATTEMPTS)
        throw error;
    }
  }
}

export interface DeletedNameCheck {
  /** True when the name is recorded and no GridSite stands for it now. */
  readonly deleted: boolean;
  /** When a GridSite of that name was first seen, if the ledger says. */
  readonly firstSeen?: string;
  readonly problems: readonly string[];
}

/** Whether `siteName` belongs to a site deleted from the grid: recorded in the ledger, no GridSite now. */
export async function checkDeletedSiteName(
  store: ResourceStore,
  ref: ObjectRef,
  siteName: string,
): Promise<DeletedNameCheck> {
  const ledger = await readSiteNameLedger(store, ref);
  if (!ledger.names.has(siteName)) return { deleted: false, problems: ledger.problems };
  const firstSeen = ledger.names.get(siteName);
  const sites = (await store.list(GRID_SITE)).items;
  const deleted = !sites.some((s) => siteIdOf(s) === siteName);
  return { deleted, ...(firstSeen !== undefined ? { firstSeen } : {}), problems: ledger.problems };
}
