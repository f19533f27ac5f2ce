/**
 * The peer poller, the I/O shell around peer-time.ts and rows.ts: under spec.signalTransport.mode poll it polls
 * every current SWIM member's signals endpoint each interval, hands valid rows to routing (PolledSignals), counts
 * refused rows, and writes PeerTimeValid under its own field manager. It also serves this site's rows.
 *
 * The membership-convergence gate (SWIM joined: a seed answered, or no seeds) holds back observation and
 * publication, never collection: a round that began while the gate was held cannot publish even if convergence
 * finishes during collection; the next round uses the converged membership.
 */
import { performance } from 'node:perf_hooks';
import type { GridNetworkResource } from '../../../schemas/crds/types.ts';
import type { Logger } from '../../shared/log.ts';
import { errorFields } from '../../shared/log.ts';
import type { ResourceStore } from '../../shared/resource-store/types.ts';
import { GRID_NETWORK } from '../kinds.ts';
import type { OperatorMetrics } from '../metrics.ts';
import { readSecretKey } from '../secrets.ts';
import { type Condition, mergeConditions, withOwnConditions } from '../controllers/status.ts';
import { patchStatusFresh } from '../controllers/status-write.ts';
import { pollPeer, type TlsMaterial } from '../../shared/signals-client.ts';
import {
  conditionWriteDue,
  initialPeerTimeState,
  observeRound,
  PEER_TIME_VALID,
  peerTimeCondition,
  type PeerAnswer,
  type PeerTimeState,
} from './peer-time.ts';
import type { PolledSignals } from './polled-signals.ts';
import { classifyAnswer, RowAges, signalsDocument, type LocalSignal } from './rows.ts';
import { PeerSignalsServer } from './server.ts';

export const PEER_SIGNALS_FIELD_MANAGER = 'grid-operator-peer-signals';

export interface PollTarget {
  readonly name: string;
  /** signals_address from the member's site record; absent: the member cannot answer. */
  readonly signalsAddress?: string;
}

export interface PeerPollerOptions {
  readonly site: string;
  readonly store: ResourceStore;
  readonly logger: Logger;
  readonly metrics: OperatorMetrics;
  readonly polled: PolledSignals;
  /** Current SWIM member peers (own site excluded, Left excluded); undefined while gossip is not running. */
  readonly members: () => readonly PollTarget[] | undefined;
  /** The membership-convergence gate: false holds observation and publication. */
  readonly converged: () => boolean;
  /** This site's local samples, served to peers. */
  readonly localSignals: () => readonly LocalSignal[];
  /** Routing must look again (polled values changed). */
  readonly onSignalsChanged: (network: string) => void;
  /** Listen address of the signals endpoint; absent: this site polls but serves nothing. */
  readonly serveAddress?: string;
  readonly intervalMs: number;
  readonly timeoutMs?: number;
  readonly now?: () => number;
  readonly monotonic?: () => number;
}

function byName(items: readonly GridNetworkResource[]): GridNetworkResource[] {
  return [...items].sort((a, b) =>
    a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0,
  );
}

export class PeerPoller {
  readonly #o: PeerPollerOptions;
  readonly #now: () => number;
  readonly #mono: () => number;
  readonly #ages = new RowAges();
  #server: PeerSignalsServer | undefined;
  #state: PeerTimeState | undefined;
  #network: string | undefined;
  #timer: NodeJS.Timeout | undefined;
  #round: Promise<void> | undefined;
  #stopped = false;
  #chain: Promise<void> = Promise.resolve();
  #tlsWarned = false;

  constructor(options: PeerPollerOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
    this.#mono = options.monotonic ?? (() => performance.now());
  }

  /** host:port of the signals endpoint as bound (for the site record), when serving. */
  get servedAddress(): string | undefined {
    return this.#server?.boundAddress;
  }

  async start(): Promise<void> {
    if (this.#o.serveAddress !== undefined) {
      this.#server = await PeerSignalsServer.start({
        address: this.#o.serveAddress,
        document: () =>
          this.#network === undefined
            ? undefined
            : signalsDocument(
                this.#o.site,
                this.#network,
                this.#ages.rows(this.#o.localSignals(), this.#now(), this.#mono()),
              ),
      });
    }
    this.#schedule(0);
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#round = this.round().catch((error) =>
        this.#o.logger.warn({ error: errorFields(error) }, 'peer signals round failed; retried next interval'),
      );
      void this.#round.finally(() => this.#schedule(this.#o.intervalMs));
    }, delayMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#round;
    await this.#server?.close();
  }

  async #material(network: GridNetworkResource): Promise<TlsMaterial | undefined> {
    const tls = network.spec.tls;
    try {
      if (tls?.caSecretRef === undefined || tls.siteSecretRef === undefined)
        throw new Error('spec.tls.caSecretRef and spec.tls.siteSecretRef are required for secure polling');
      const site = { ...tls.siteSecretRef, key: undefined };
      const material = {
        caPem: (await readSecretKey(this.#o.store, tls.caSecretRef, 'ca.crt')).toString('utf8'),
        certPem: (await readSecretKey(this.#o.store, site, 'tls.crt')).toString('utf8'),
        keyPem: (await readSecretKey(this.#o.store, site, 'tls.key')).toString('utf8'),
      };
      this.#server?.useMaterial(material);
      this.#tlsWarned = false;
      return material;
    } catch (error) {
      if (!this.#tlsWarned) {
        this.#tlsWarned = true;
        this.#o.logger.warn(
          { network: network.metadata.name, error: errorFields(error) },
          'peer signals: no usable site TLS material, so peers are neither polled nor served (not a clean round)',
        );
      }
      return undefined;
    }
  }

  /** One round, never overlapping another (tests may call it beside the timer). */
  round(): Promise<void> {
    const run = this.#chain.then(() => this.#roundOnce());
    this.#chain = run.catch(() => undefined);
    return run;
  }

  async #roundOnce(): Promise<void> {
    const o = this.#o;
    const gateOpen = o.converged();
    const network = byName((await o.store.list(GRID_NETWORK)).items as unknown as GridNetworkResource[])[0];
    if (network === undefined || network.spec.signalTransport?.mode !== 'poll') {
      // Under gossip the endpoint still serves this site's rows: consumer gateways with a serving config poll it.
      this.#network = network?.metadata.name;
      if (network !== undefined && this.#server !== undefined) await this.#material(network);
      let changed = false;
      for (const site of o.polled.sites()) changed = o.polled.dropSite(site) || changed;
      if (changed && network !== undefined) o.onSignalsChanged(network.metadata.name);
      return;
    }
    const name = network.metadata.name;
    this.#network = name;
    this.#state ??= initialPeerTimeState(
      (network.status?.conditions as Condition[] | undefined)?.find((c) => c.type === PEER_TIME_VALID),
    );
    const material = await this.#material(network);
    const members = o.members() ?? [];
    const memberNames = new Set(members.map((m) => m.name));
    const answers = new Map<string, PeerAnswer>();
    let changed = false;
    if (material !== undefined) {
      await Promise.all(
        members.map(async (member) => {
          if (member.signalsAddress === undefined || member.signalsAddress === '') {
            o.metrics.peerSignalPolls.inc({ peer: member.name, outcome: 'no_address' });
            return;
          }
          const result = await pollPeer(member.name, member.signalsAddress, material, o.timeoutMs ?? 5_000);
          const classified = result.ok
            ? classifyAnswer(result.body, member.name, name)
            : { ok: false as const, error: result.error };
          if (!classified.ok) {
            o.metrics.peerSignalPolls.inc({ peer: member.name, outcome: result.ok ? 'invalid' : 'no_answer' });
            o.logger.debug(
              { peer: member.name, error: classified.error },
              'peer signals: no usable answer; the peer keeps its standing',
            );
            return;
          }
          o.metrics.peerSignalPolls.inc({ peer: member.name, outcome: 'answered' });
          const { valid, refused } = classified.answer;
          for (const r of refused) o.metrics.peerSignalsRefused.inc({ peer: member.name, reason: r.reason });
          if (refused.length > 0)
            o.logger.warn(
              { peer: member.name, refused: refused.slice(0, 5).map((r) => r.detail) },
              "peer signals: rows refused and dropped; the peer's other rows stay in use",
            );
          const skewed = refused.filter((r) => r.reason === 'skew');
          answers.set(member.name, { kind: 'answered', rejectedRows: skewed.length });
          changed =
            o.polled.replaceSite(
              member.name,
              valid,
              skewed.flatMap((r) => (r.provider !== undefined ? [r.provider] : [])),
              this.#now(),
            ) || changed;
        }),
      );
    }
    for (const site of o.polled.sites()) if (!memberNames.has(site)) changed = o.polled.dropSite(site) || changed;
    if (changed) o.onSignalsChanged(name);
    if (!gateOpen) return;
    this.#state = observeRound(this.#state, { members: [...memberNames], answers, secure: material !== undefined });
    await this.#publish(name);
  }

  async #publish(name: string): Promise<void> {
    const desired = peerTimeCondition(this.#state!);
    if (desired === undefined) return;
    // Built from a fresh read and sent with its resourceVersion: a conflicting writer makes it read again.
    const result = await patchStatusFresh<GridNetworkResource>(
      this.#o.store,
      GRID_NETWORK,
      { name },
      PEER_SIGNALS_FIELD_MANAGER,
      (fresh) => {
        const conditions = fresh.status?.conditions as Condition[] | undefined;
        const generation = fresh.metadata.generation ?? 1;
        if (
          !conditionWriteDue(
            conditions?.find((c) => c.type === PEER_TIME_VALID),
            desired,
            generation,
          )
        )
          return undefined;
        const next = mergeConditions(
          conditions,
          [{ type: PEER_TIME_VALID, ...desired, observedGeneration: generation }],
          this.#now(),
        );
        return { conditions: withOwnConditions(conditions, next, [PEER_TIME_VALID]) };
      },
    );
    if (!result.written) return;
    this.#o.logger.info({ network: name, status: desired.status, reason: desired.reason }, 'PeerTimeValid written');
  }
}
