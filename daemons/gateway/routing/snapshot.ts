// An accepted overlay turned into the immutable structure requests select from. One snapshot serves a request
// from start to end; a reload builds a new one and swaps the reference. Round-robin cursors live on the snapshot
// because docs/contract.md §3.1 keeps them "per group per accepted snapshot": a new revision starts every cursor
// afresh.
import { stableId } from '../../../schemas/fnv1a.ts';
import type { CandidateKind, OverlayCandidate, OverlayPayload, SelectionMode } from '../../../schemas/overlay/types.ts';
import { credentialRef, type CredentialRef } from '../credential-ref.ts';

export interface RoutingCandidate {
  readonly candidate: OverlayCandidate;
  /** The overlay's stable_id, or the FNV-1a identity when an older producer omitted it. */
  readonly stableId: string;
  /** Selection group; ungrouped (legacy) candidates all share group 0 in overlay order. */
  readonly group: number;
  /** The candidate's credential reference as credential_inject reads it, made once per snapshot. */
  readonly credential: CredentialRef | undefined;
}

export interface CapabilityRoutes {
  readonly kind: CandidateKind;
  readonly name: string;
  /** Groups in priority order, each in overlay order. */
  readonly groups: readonly (readonly RoutingCandidate[])[];
  /** capabilityKey(kind, name), made once per snapshot rather than on every request. */
  readonly key: string;
  /** Each group's round-robin cursor key, by group index. */
  readonly cursorKeys: readonly string[];
}

export interface RoutingSnapshot {
  /** Content-addressed revision, or null for a legacy bare payload (which carries none). */
  readonly revision: string | null;
  readonly format: 'envelope' | 'legacy';
  readonly network: string;
  readonly localSite: string;
  readonly mode: SelectionMode;
  readonly candidateCount: number;
  /** Inference models this snapshot can route, in first-appearance order (for /v1/models). */
  readonly models: readonly string[];
  readonly acceptedAtMs: number;
  /** Mutable by design: round-robin positions, keyed by capability and group. */
  readonly cursors: Map<string, number>;
  routesFor(kind: CandidateKind, name: string): CapabilityRoutes | undefined;
  /** The MCP tool server behind a `tool/<provider>` cluster, from its mcp_tool candidates (mcp_route). */
  toolServer(cluster: string): ToolServer | undefined;
}

/** One AgentToolProvider as the overlay publishes it: one mcp_tool candidate per tool, all on its cluster. */
export interface ToolServer {
  readonly cluster: string;
  /** The site serving it (the first candidate's, in overlay order). */
  readonly site: string;
  /** A candidate of it, named on the provider hop as x-ai-routing-candidate. */
  readonly stableId: string;
  /** The tools this gateway's callers may call on it. */
  readonly tools: ReadonlySet<string>;
  /** False when every candidate of it is admitting no new requests. */
  readonly admitting: boolean;
}

export function capabilityKey(kind: string, name: string): string {
  return `${kind}\u0000${name}`;
}

export function buildSnapshot(
  payload: OverlayPayload,
  revision: string | null,
  format: 'envelope' | 'legacy',
  acceptedAtMs: number,
): RoutingSnapshot {
  const grouped = new Map<string, { kind: CandidateKind; name: string; groups: RoutingCandidate[][] }>();
  const models: string[] = [];
  for (const candidate of payload.candidates) {
    const key = capabilityKey(candidate.kind, candidate.name);
    let entry = grouped.get(key);
    if (entry === undefined) {
      entry = { kind: candidate.kind, name: candidate.name, groups: [] };
      grouped.set(key, entry);
      if (candidate.kind === 'inference_model') models.push(candidate.name);
    }
    const group = candidate.selection_group ?? 0;
    while (entry.groups.length <= group) entry.groups.push([]);
    entry.groups[group]?.push({
      candidate,
      stableId: candidate.stable_id ?? stableId(candidate.kind, candidate.name, candidate.site, candidate.cluster),
      group,
      credential: credentialRef(candidate.credential),
    });
  }
  const toolServers = new Map<
    string,
    { cluster: string; site: string; stableId: string; tools: Set<string>; admitting: boolean }
  >();
  for (const candidate of payload.candidates) {
    if (candidate.kind !== 'mcp_tool') continue;
    let server = toolServers.get(candidate.cluster);
    if (server === undefined) {
      const id = candidate.stable_id ?? stableId(candidate.kind, candidate.name, candidate.site, candidate.cluster);
      server = { cluster: candidate.cluster, site: candidate.site, stableId: id, tools: new Set(), admitting: false };
      toolServers.set(candidate.cluster, server);
    }
    // A second site publishing the same cluster name cannot be told apart by the gateway's cluster: the first wins.
    if (candidate.site !== server.site) continue;
    server.tools.add(candidate.name);
    if ((candidate.admission_state ?? 'new_and_existing') !== 'none') server.admitting = true;
  }
  // By kind, then name: a request looks its capability up with the two strings it has, without joining them.
  const routes = new Map<CandidateKind, Map<string, CapabilityRoutes>>();
  for (const [key, entry] of grouped) {
    const groups = entry.groups.filter((g) => g.length > 0);
    let byName = routes.get(entry.kind);
    if (byName === undefined) routes.set(entry.kind, (byName = new Map()));
    byName.set(entry.name, {
      kind: entry.kind,
      name: entry.name,
      groups,
      key,
      cursorKeys: groups.map((_, g) => `${key}\u0000${g}`),
    });
  }
  return {
    revision,
    format,
    network: payload.network,
    localSite: payload.local_site,
    mode: payload.selection_policy?.mode ?? 'deterministic',
    candidateCount: payload.candidates.length,
    models,
    acceptedAtMs,
    cursors: new Map(),
    routesFor: (kind, name) => routes.get(kind)?.get(name),
    toolServer: (cluster) => toolServers.get(cluster),
  };
}
