// Shared by the gossip fuzz suites: the member under attack runs in a child process (member-process.ts); the
// suite measures it before and after, and checks the invariants every fuzz run must keep (checkAfterRun).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { expect } from 'vitest';

export interface MemberStats {
  readonly rss: number;
  readonly fds: number;
  /** Longest wall-clock event-loop delay (includes time the OS ran other processes). */
  readonly maxDelayMs: number;
  /** Longest gap between timer ticks that the member's own thread spent computing: a stall it caused. */
  readonly maxBusyStallMs: number;
  readonly drops: Record<string, number>;
  readonly packetsReceived: number;
  readonly inboundStreams: number;
  readonly inboundBufferedBytes: number;
  readonly members: number;
}

/** Bounds a run must return within (measured against the member's own figures before the run). */
export const BOUNDS = { rssGrowthBytes: 64 * 1024 * 1024, fdGrowth: 4, maxBusyStallMs: 100 } as const;

export class FuzzedMember {
  readonly key: Buffer;
  readonly address: string;
  readonly #child: ChildProcess;
  readonly #output: Buffer[];

  private constructor(key: Buffer, child: ChildProcess, address: string, output: Buffer[]) {
    this.key = key;
    this.#child = child;
    this.address = address;
    this.#output = output;
  }

  static async start(): Promise<FuzzedMember> {
    const key = randomBytes(32);
    const output: Buffer[] = [];
    const child = spawn(process.execPath, [join(import.meta.dirname, 'member-process.ts')], {
      env: { PATH: process.env['PATH'] ?? '', GRID_SWIM_ENCRYPT_KEY: key.toString('hex') },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    child.stderr?.on('data', (d: Buffer) => output.push(d));
    const address = await new Promise<string>((resolve, reject) => {
      let text = '';
      child.stdout?.on('data', (d: Buffer) => {
        output.push(d);
        text += d.toString();
        const line = text.split('\n')[0];
        if (text.includes('\n') && line !== undefined) resolve(line.trim());
      });
      child.once('exit', (code) =>
        reject(
          new Error(
            `member process exited (${code}) before it started: ${Buffer.concat(output).toString().slice(0, 500)}`,
          ),
        ),
      );
    });
    return new FuzzedMember(key, child, address, output);
  }

  get alive(): boolean {
    return this.#child.exitCode === null && this.#child.signalCode === null;
  }

  stats(): Promise<MemberStats> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('member process did not answer "stats" within 5 s')), 5_000);
      this.#child.once('message', (m) => {
        clearTimeout(t);
        resolve(m as MemberStats);
      });
      this.#child.send({ cmd: 'stats' });
    });
  }

  /** Stats once the member has closed its inbound streams (a stream's close lags the answer), at most 3 s. */
  async settledStats(): Promise<MemberStats> {
    const until = Date.now() + 3_000;
    let s = await this.stats();
    while (s.inboundStreams > 0 && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 50));
      const next = await this.stats();
      // stats() resets the delay histogram: keep the longest delay seen over the whole run.
      s = {
        ...next,
        maxDelayMs: Math.max(s.maxDelayMs, next.maxDelayMs),
        maxBusyStallMs: Math.max(s.maxBusyStallMs, next.maxBusyStallMs),
      };
    }
    return s;
  }

  /** Everything the member process wrote. */
  output(): Buffer {
    return Buffer.concat(this.#output);
  }

  async stop(): Promise<void> {
    if (!this.alive) return;
    const exited = new Promise<void>((r) => this.#child.once('exit', () => r()));
    this.#child.send({ cmd: 'stop' });
    const t = setTimeout(() => this.#child.kill('SIGKILL'), 3_000);
    await exited;
    clearTimeout(t);
  }
}

/** The invariants of every fuzz run; each failure message names the seed that reproduces it. */
export function checkAfterRun(seed: number, member: FuzzedMember, before: MemberStats, after: MemberStats): void {
  const why = (what: string) => `${what} (reproduce: GOSSIP_FUZZ_SEED=${seed})`;
  expect(member.alive, why('member process alive')).toBe(true);
  expect(after.rss - before.rss, why('RSS growth')).toBeLessThan(BOUNDS.rssGrowthBytes);
  expect(after.fds - before.fds, why('open descriptor growth')).toBeLessThanOrEqual(BOUNDS.fdGrowth);
  expect(after.maxBusyStallMs, why('longest event-loop stall the member caused (ms of its own CPU)')).toBeLessThan(
    BOUNDS.maxBusyStallMs,
  );
  expect(after.inboundStreams, why('inbound streams still open')).toBe(0);
  const out = member.output();
  for (const form of [member.key.toString('hex'), member.key.toString('base64'), member.key.toString('base64url')]) {
    expect(out.toString('latin1').includes(form), why('key bytes in the member output')).toBe(false);
  }
  expect(out.includes(member.key), why('raw key bytes in the member output')).toBe(false);
}

export function summary(
  suite: string,
  seed: number,
  figures: Record<string, string | number>,
  before: MemberStats,
  after: MemberStats,
): string {
  const drops = Object.entries(after.drops)
    .filter(([, n]) => n > 0)
    .map(([r, n]) => `${r}=${n}`)
    .join(' ');
  const mb = ((after.rss - before.rss) / 1024 / 1024).toFixed(1);
  const fields = Object.entries(figures)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  return `[fuzz] ${suite}: seed=${seed} ${fields} rss_growth_mb=${mb} fd_growth=${after.fds - before.fds} max_busy_stall_ms=${after.maxBusyStallMs.toFixed(1)} max_wall_loop_delay_ms=${after.maxDelayMs.toFixed(1)} drops: ${drops}`;
}
