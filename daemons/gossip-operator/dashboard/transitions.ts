/**
 * Recent phase transitions for the dashboard: site phases and each provider's admission in the overlay (what
 * routing acts on: a dead backend turns stale within a refresh interval, long before its Ready condition flips),
 * as this operator saw them change. Changes are observed when a view is built (an open page builds one a second),
 * so a change that came and went while nobody looked is not listed (grid_site_phase_transition_total counts every
 * site transition regardless).
 * Pure: the caller keeps the last phases and the list between builds. A site seen for the first time contributes
 * its recorded lastTransitionTime (from unknown), so a fresh page is not empty after an operator restart.
 */
import type { ProviderRow, SiteRow, TransitionRow } from './read-model.ts';

export const MAX_TRANSITIONS = 50;

export interface TransitionState {
  readonly last: ReadonlyMap<string, string>;
  readonly recent: readonly TransitionRow[];
}

export const EMPTY_TRANSITIONS: TransitionState = { last: new Map(), recent: [] };

export interface ObservedPhase {
  readonly kind: TransitionRow['kind'];
  readonly name: string;
  readonly phase: string;
  readonly reason: string;
  /** When the recorded phase was entered, if the status says. */
  readonly since?: string | null;
}

export function observePhases(
  state: TransitionState,
  observed: readonly ObservedPhase[],
  nowIso: string,
): TransitionState {
  const last = new Map(state.last);
  const added: TransitionRow[] = [];
  for (const o of observed) {
    const key = `${o.kind}/${o.name}`;
    const previous = last.get(key);
    last.set(key, o.phase);
    if (previous === o.phase) continue;
    if (previous === undefined) {
      if (o.since !== undefined && o.since !== null)
        added.push({ at: o.since, kind: o.kind, name: o.name, from: null, to: o.phase, reason: o.reason });
      continue;
    }
    added.push({ at: nowIso, kind: o.kind, name: o.name, from: previous, to: o.phase, reason: o.reason });
  }
  if (added.length === 0) return { last, recent: state.recent };
  const recent = [...added, ...state.recent].sort((a, b) => b.at.localeCompare(a.at)).slice(0, MAX_TRANSITIONS);
  return { last, recent };
}

export function sitePhases(rows: readonly SiteRow[]): ObservedPhase[] {
  return rows
    .filter((r) => !r.local)
    .map((r) => ({ kind: 'site', name: r.name, phase: r.phase, reason: r.reason, since: r.lastTransitionTime }));
}

export function providerPhases(rows: readonly ProviderRow[]): ObservedPhase[] {
  return rows.map((r) => ({
    kind: 'provider',
    name: `${r.site}/${r.cluster}`,
    phase: r.fresh === false ? `${r.admission} (stale)` : r.admission,
    reason: r.ready === null ? '' : `Ready ${r.ready}`,
  }));
}
