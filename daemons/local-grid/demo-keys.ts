/**
 * Demo caller keys of the local grid: a compiled consumer declared with `callerKeys` mounts a keys Secret that only
 * `agn key mint` would fill in a cluster. Locally the runner mints one key per tenant of the GridNetwork's
 * budgetPolicy (or one `demo` tenant when it declares none) at the first start, keeps them in the state directory
 * (0600) so the next start reuses them, and puts only their salted hashes into the Secret. The keys themselves leave
 * this module only to the terminal of whoever ran `agn up` (the curl line) and to the traffic the runner sends.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type CallerKeyEntry,
  type CallerKeysFile,
  callerKeysProblems,
  hashCallerKey,
  mintCallerKey,
} from '../../schemas/gateway/caller-keys.ts';
import { ensurePrivateDirSync, tightenPrivateFileSync, writePrivateFileSync } from '../shared/private-files.ts';
import type { CompiledSite } from './compiled-grid.ts';

export interface DemoCallerKey {
  readonly tenant: string;
  readonly key: string;
  readonly entry: CallerKeyEntry;
}

/** Whether any of these gateway configs runs caller_auth (a consumer declared with callerKeys). */
export function requiresCallerKeys(configs: readonly Record<string, unknown>[]): boolean {
  return configs.some((c) =>
    ((c['filter_chains'] ?? []) as { filters?: { filter?: unknown }[] }[]).some((chain) =>
      (chain.filters ?? []).some((f) => f.filter === 'caller_auth'),
    ),
  );
}

/** The tenants the demo mints keys for: the GridNetwork's budgetPolicy tenants, else one `demo` tenant. */
export function demoTenants(sites: readonly CompiledSite[]): string[] {
  const tenants = new Set<string>();
  for (const site of sites) {
    for (const network of site.objects.filter((o) => o.kind === 'GridNetwork')) {
      const policy = ((network['spec'] ?? {}) as { budgetPolicy?: { tenants?: { tenantId?: unknown }[] } })
        .budgetPolicy;
      for (const tenant of policy?.tenants ?? []) if (typeof tenant.tenantId === 'string') tenants.add(tenant.tenantId);
    }
  }
  return tenants.size === 0 ? ['demo'] : [...tenants].sort();
}

function stored(file: string): DemoCallerKey[] {
  if (!existsSync(file)) return [];
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as { keys?: unknown };
    const keys = Array.isArray(parsed.keys) ? (parsed.keys as DemoCallerKey[]) : [];
    // A stored entry is reused only when it is well formed and still accepts its key.
    const entries = { keys: keys.map((k) => k.entry) };
    if (callerKeysProblems(entries).length > 0) return [];
    return keys.filter(
      (k) =>
        typeof k.key === 'string' &&
        typeof k.tenant === 'string' &&
        k.entry.tenant === k.tenant &&
        hashCallerKey(k.key, k.entry.salt) === k.entry.hash,
    );
  } catch {
    return [];
  }
}

/** One key per tenant, minted for the tenants the state directory has none for; the file is rewritten 0600. */
export function ensureDemoCallerKeys(stateDir: string, tenants: readonly string[]): DemoCallerKey[] {
  const dir = join(stateDir, 'caller-keys');
  ensurePrivateDirSync(dir);
  const file = join(dir, 'demo-keys.json');
  const previous = stored(file);
  const keys = tenants.map(
    (tenant) => previous.find((k) => k.tenant === tenant) ?? { tenant, ...mintCallerKey(tenant) },
  );
  const unchanged = keys.length === previous.length && keys.every((k, i) => previous[i] === k);
  if (unchanged) tightenPrivateFileSync(file);
  else writePrivateFileSync(file, `${JSON.stringify({ keys }, null, 2)}\n`);
  return keys;
}

/** The keys file the Secret carries: hashes only. */
export function demoKeysFile(keys: readonly DemoCallerKey[]): CallerKeysFile {
  return { keys: keys.map((k) => k.entry) };
}
