// The extension point between SWIM and the state it carries (state/gossip-state.ts implements it). SWIM knows
// nothing of providers or sites: it moves opaque JSON. Implementations must not block and should not throw;
// a throw is contained, counted as delegate_error, and the packet's other messages are still handled.
export interface StateDelegate {
  /** One piggybacked user broadcast from member `from`. */
  notifyMessage(data: unknown, from: string): void;
  /** Our full state for a push-pull exchange (JSON-serializable). */
  localState(join: boolean): unknown;
  /** The peer's full state from a push-pull exchange. */
  mergeRemoteState(state: unknown, join: boolean, from: string): void;
}
