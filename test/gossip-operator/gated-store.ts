// A real store with a hook after each `get`: lets a test hold one writer between its read and its patch while
// another writer goes ahead, which is the interleaving optimistic concurrency must survive.
import type { ObjectRef, ResourceKind, ResourceStore } from '../../daemons/shared/resource-store/types.ts';

export interface Gate {
  /** Resolves when the held `get` has read (its answer is then stale once the test writes). */
  readonly reached: Promise<void>;
  release(): void;
}

/** Holds the first `get` that `hold` picks (default: the first one) after it read, until the test releases the gate. */
export function gatedStore(
  store: ResourceStore,
  hold: (kind: ResourceKind, ref: ObjectRef) => boolean = () => true,
): { store: ResourceStore; gate: Gate; gets: () => number } {
  let gets = 0;
  let held = false;
  let reached!: () => void;
  let release!: () => void;
  const reachedP = new Promise<void>((resolve) => (reached = resolve));
  const releasedP = new Promise<void>((resolve) => (release = resolve));
  const wrapped = new Proxy(store, {
    get(target, prop) {
      if (prop === 'get') {
        return async (...args: Parameters<ResourceStore['get']>) => {
          const object = await target.get(...args);
          gets++;
          if (!held && hold(args[0], args[1])) {
            held = true;
            reached();
            await releasedP;
          }
          return object;
        };
      }
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { store: wrapped, gate: { reached: reachedP, release }, gets: () => gets };
}
