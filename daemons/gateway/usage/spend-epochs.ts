// Which spend report this gateway process sends, and what the operator's answer means for the next one. A process
// reports its cumulative spend under an epoch; when the operator answers epoch_retired (it forgot the epoch, see
// daemons/gossip-operator/tenant-spend/ledger.ts), the process starts a new epoch above the operator's watermark that
// carries only the spend after its last acknowledged report, so nothing is lost and nothing counted twice (except
// what a report recorded but never acknowledged carried: the operator counted it, the new epoch counts it again).
// Pure: the clock and the random source are injected; the reporter does the sending.
import { epochAbove } from '../../../schemas/signals/spend-epoch.ts';

export interface SpendReportBody {
  readonly epoch: string;
  readonly replica?: string;
  readonly sequence: number;
  readonly spend_usd: Readonly<Record<string, number>>;
  readonly final?: true;
}

/** A report to send, with the process's cumulative spend it stands for (what an acknowledgement acknowledges). */
export interface PendingSpendReport {
  readonly body: SpendReportBody;
  readonly cumulative: Readonly<Record<string, number>>;
}

/** acked: recorded (or already held); new_epoch: send again under the new epoch; refused: retried as it is. */
export type SpendAnswer = 'acked' | 'new_epoch' | 'refused';

export interface SpendEpochsOptions {
  readonly now: () => number;
  /** 16 or more lowercase hex digits, fresh on every call. */
  readonly randomHex: () => string;
  readonly replica?: string;
  /** The first epoch (tests); drawn from the clock and randomHex by default. */
  readonly epoch?: string;
}

export class SpendEpochs {
  readonly #o: SpendEpochsOptions;
  #epoch: string;
  /** The cumulative spend the current epoch's amounts are counted from (what earlier epochs had acknowledged). */
  #base: Readonly<Record<string, number>> = {};
  #ackedSequence = 0;
  #ackedCumulative: Readonly<Record<string, number>> = {};
  /** Whether the operator holds the current epoch (some report of it was acknowledged). */
  #epochHeld = false;

  constructor(options: SpendEpochsOptions) {
    this.#o = options;
    this.#epoch = options.epoch ?? epochAbove(options.now(), undefined, options.randomHex());
  }

  get epoch(): string {
    return this.#epoch;
  }

  /** The sequence the operator last acknowledged (across epochs). */
  get ackedSequence(): number {
    return this.#ackedSequence;
  }

  /**
   * The report for the ledger's `sequence` and `cumulative` spend now; undefined when the operator has it all. A final
   * report (at shutdown) goes out even when nothing is new, so the operator retires the epoch at once.
   */
  report(
    sequence: number,
    cumulative: Readonly<Record<string, number>>,
    final = false,
  ): PendingSpendReport | undefined {
    const fresh = sequence > this.#ackedSequence;
    if (!fresh && !(final && this.#epochHeld)) return undefined;
    const spend: Record<string, number> = {};
    for (const [tenant, usd] of Object.entries(cumulative))
      spend[tenant] = Math.max(0, usd - (this.#base[tenant] ?? 0));
    const body: SpendReportBody = {
      epoch: this.#epoch,
      ...(this.#o.replica === undefined ? {} : { replica: this.#o.replica }),
      sequence: Math.max(1, sequence),
      spend_usd: spend,
      ...(final ? { final: true as const } : {}),
    };
    return { body, cumulative: { ...cumulative } };
  }

  /** Takes the operator's answer to `sent` (HTTP status and parsed body, when JSON). */
  answered(sent: PendingSpendReport, status: number, body: unknown): SpendAnswer {
    // An answer to an earlier epoch's report says nothing about the current one.
    if (sent.body.epoch !== this.#epoch) return 'refused';
    if (status === 200 || status === 202) {
      this.#epochHeld = true;
      if (sent.body.sequence > this.#ackedSequence) {
        this.#ackedSequence = sent.body.sequence;
        this.#ackedCumulative = sent.cumulative;
      }
      return 'acked';
    }
    const answer = (typeof body === 'object' && body !== null ? body : {}) as {
      outcome?: unknown;
      watermark?: unknown;
    };
    if (status === 410 && answer.outcome === 'epoch_retired') {
      this.#base = this.#ackedCumulative;
      this.#epochHeld = false;
      this.#epoch = epochAbove(
        this.#o.now(),
        typeof answer.watermark === 'string' ? answer.watermark : undefined,
        this.#o.randomHex(),
      );
      return 'new_epoch';
    }
    return 'refused';
  }
}
