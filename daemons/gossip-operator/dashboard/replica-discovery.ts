/**
 * The dashboard's replica targets in a cluster: the consumer gateway pods of the site namespace (found by the labels
 * the constructs put on them), each read at its pod IP on the gateway container's `admin` port and the overlay-sync
 * sidecar's `sync-health` port. One list+watch through the resource store keeps them current; the dashboard reads
 * the last computed list from memory, so a page view never waits on the API server.
 */
import type { Logger } from '../../shared/log.ts';
import { ResourceStoreError } from '../../shared/resource-store/errors.ts';
import type { ResourceStore, WatchSubscription } from '../../shared/resource-store/types.ts';
import { CONSUMER_GATEWAY_POD_SELECTOR, CONSUMER_POD } from '../../../schemas/workload-labels.ts';
import { POD, type PodObject } from '../kinds.ts';
import type { DashboardTarget } from './targets.ts';

function portOf(pod: PodObject, container: string, port: string): number | undefined {
  const found = pod.spec?.containers
    ?.find((c) => c.name === container)
    ?.ports?.find((p) => p.name === port)?.containerPort;
  return typeof found === 'number' && Number.isInteger(found) && found > 0 && found <= 65535 ? found : undefined;
}

/**
 * The admin endpoints of the pods, by pod name. A pod counts while it runs and has an IP: a pod that is running but
 * not ready stays (its row shows it not ready, which is what an operator looks for), a pending pod without an IP and
 * a pod being deleted do not.
 */
export function replicaTargets(pods: Iterable<PodObject>): DashboardTarget[] {
  const targets: DashboardTarget[] = [];
  for (const pod of pods) {
    const ip = pod.status?.podIP;
    if (
      pod.status?.phase !== 'Running' ||
      typeof ip !== 'string' ||
      ip === '' ||
      pod.metadata.deletionTimestamp !== undefined
    )
      continue;
    const host = ip.includes(':') ? `[${ip}]` : ip;
    const replica = pod.metadata.name;
    const gateway = portOf(pod, CONSUMER_POD.gatewayContainer, CONSUMER_POD.gatewayAdminPort);
    const sync = portOf(pod, CONSUMER_POD.overlaySyncContainer, CONSUMER_POD.overlaySyncHealthPort);
    if (gateway !== undefined) targets.push({ replica, kind: 'gateway', address: `${host}:${gateway}` });
    if (sync !== undefined) targets.push({ replica, kind: 'overlay-sync', address: `${host}:${sync}` });
  }
  return targets.sort((a, b) =>
    a.replica === b.replica ? a.kind.localeCompare(b.kind) : a.replica < b.replica ? -1 : 1,
  );
}

export interface ReplicaDiscoveryOptions {
  readonly store: ResourceStore;
  /** The site namespace: the operator's own, where the constructs put the consumer gateways. */
  readonly namespace: string;
  readonly logger: Logger;
}

export class ReplicaDiscovery {
  readonly #o: ReplicaDiscoveryOptions;
  readonly #pods = new Map<string, PodObject>();
  #targets: readonly DashboardTarget[] = [];
  #watch: WatchSubscription | undefined;
  #lastProblem: string | undefined;

  constructor(options: ReplicaDiscoveryOptions) {
    this.#o = options;
  }

  start(): void {
    const { store, namespace, logger } = this.#o;
    this.#watch = store.watch<PodObject>(POD, {
      namespace,
      labelSelector: CONSUMER_GATEWAY_POD_SELECTOR,
      onEvent: (event) => {
        if (event.type === 'DELETED') this.#pods.delete(event.object.metadata.name);
        else this.#pods.set(event.object.metadata.name, event.object);
        this.#update();
      },
      onSynced: (items) => {
        this.#pods.clear();
        for (const pod of items) this.#pods.set(pod.metadata.name, pod);
        this.#update();
        if (this.#lastProblem !== undefined)
          logger.info({ namespace }, 'dashboard: consumer gateway pods are listed again');
        this.#lastProblem = undefined;
      },
      onRestart: (reason, error) => {
        if (reason !== 'error' || error === undefined) return;
        // Once per distinct problem: a watch retried with backoff would otherwise log the same 403 forever.
        if (error.message === this.#lastProblem) return;
        this.#lastProblem = error.message;
        const forbidden = error instanceof ResourceStoreError && error.code === 'forbidden';
        logger.warn(
          { namespace, error: error.message },
          forbidden
            ? `dashboard: cannot list and watch pods in namespace ${namespace}, so the page shows no replica rows; grant list and watch on pods there (the constructs do when the site declares dashboard access), or pass --dashboard-targets`
            : 'dashboard: listing the consumer gateway pods failed; retrying, the page keeps the replicas it knew',
        );
      },
    });
  }

  /** The current targets (memory only). */
  targets(): readonly DashboardTarget[] {
    return this.#targets;
  }

  async close(): Promise<void> {
    await this.#watch?.close();
    this.#watch = undefined;
  }

  #update(): void {
    this.#targets = replicaTargets(this.#pods.values());
  }
}
