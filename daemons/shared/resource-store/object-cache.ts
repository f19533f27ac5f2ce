// The watcher-side view of a collection, shared by both stores: which objects a subscriber has been told
// about, so a relist (after 410, a reconnect or a periodic resync) turns into exactly the ADDED / MODIFIED /
// DELETED events the subscriber missed, and nothing it already saw is reported twice.

import type { KubeObject, ListOptions, WatchEvent } from './types.ts';

export function objectKey(object: KubeObject): string {
  return `${object.metadata.namespace ?? ''}/${object.metadata.name}`;
}

/** Whether the object passes a watch's namespace / name / label filters. */
export function matchesFilter(object: KubeObject, filter: ListOptions): boolean {
  if (filter.namespace !== undefined && object.metadata.namespace !== filter.namespace) return false;
  if (filter.name !== undefined && object.metadata.name !== filter.name) return false;
  if (filter.labelSelector !== undefined && filter.labelSelector.trim() !== '') {
    const labels = object.metadata.labels ?? {};
    for (const term of filter.labelSelector.split(',')) {
      const [key, value] = term.split('=', 2).map((s) => s.trim());
      if (key === undefined || key === '') continue;
      if (value === undefined ? !(key in labels) : labels[key] !== value) return false;
    }
  }
  return true;
}

/** Validates a label selector up front so a typo fails at subscribe time, not silently on every event. */
export function checkLabelSelector(selector: string | undefined): string | undefined {
  if (selector === undefined || selector.trim() === '') return undefined;
  for (const term of selector.split(',')) {
    if (!/^\s*[A-Za-z0-9./_-]+\s*(=\s*[A-Za-z0-9._-]*\s*)?$/.test(term)) {
      return `label selector term ${JSON.stringify(term)} is not "key" or "key=value"`;
    }
  }
  return undefined;
}

export class ObjectCache<T extends KubeObject = KubeObject> {
  readonly #objects = new Map<string, T>();

  get size(): number {
    return this.#objects.size;
  }

  values(): T[] {
    return [...this.#objects.values()];
  }

  /** Applies one streamed event; returns false for a stale or duplicate one (same resourceVersion). */
  apply(event: WatchEvent<T>): boolean {
    const key = objectKey(event.object);
    const known = this.#objects.get(key);
    if (event.type === 'DELETED') {
      if (known === undefined) return false;
      this.#objects.delete(key);
      return true;
    }
    if (known !== undefined && known.metadata.resourceVersion === event.object.metadata.resourceVersion) return false;
    this.#objects.set(key, event.object);
    return true;
  }

  /**
   * Replaces the whole view with a fresh list and returns the events that take a subscriber from the old view
   * to the new one. Equal resourceVersions mean "unchanged" (the API server bumps it on every write).
   */
  replace(items: readonly T[]): WatchEvent<T>[] {
    const events: WatchEvent<T>[] = [];
    const seen = new Set<string>();
    for (const object of items) {
      const key = objectKey(object);
      seen.add(key);
      const known = this.#objects.get(key);
      if (known === undefined) {
        events.push({ type: 'ADDED', object });
      } else if (known.metadata.resourceVersion !== object.metadata.resourceVersion) {
        events.push({ type: 'MODIFIED', object });
      }
      this.#objects.set(key, object);
    }
    for (const [key, object] of this.#objects) {
      if (!seen.has(key)) {
        this.#objects.delete(key);
        events.push({ type: 'DELETED', object });
      }
    }
    return events;
  }
}
