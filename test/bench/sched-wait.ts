// How long the processes of a benchmarked path waited for a CPU once woken (`bench:gateway --sched`).
//
// An added p99 of 1 ms is a claim about the slowest 1 % of requests. On a 2-core machine shared by the load
// generator, the sim and one or two proxies, a request is late whenever one of the processes it passes through is
// woken (its socket became readable) but finds both cores busy and waits for the scheduler. `perf sched record`
// traces every context switch and wakeup on the machine; `perf sched timehist` gives, for each time a thread was
// switched in, its "sch delay": from the wakeup to running. Counting the waits of a path's processes (the proxies,
// the sim, this load generator) inside that path's windows tells how often the machine alone adds a millisecond to a
// request, whatever the proxy does.
//
// The recording uses CLOCK_MONOTONIC (`-k CLOCK_MONOTONIC`), the clock of process.hrtime(), so a window's start and
// end taken here select its events. Tracing costs the traced processes a little on every switch, so it is opt-in.
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';

/** One switch-in of a thread: when (monotonic seconds), which process, how long it waited after its wakeup (ms). */
export interface SchedEvent {
  readonly at: number;
  readonly pid: number;
  readonly waitMs: number;
}

// `perf sched timehist` rows: time, [cpu], comm[tid] or comm[tid/pid] (a comm may hold spaces: "V8 DefaultWorke"),
// then wait time, sch delay and run time in ms. <idle> rows carry no [tid] and do not match.
const ROW = /^\s*(\d+\.\d+)\s+\[\d+\]\s+.*?\[(\d+)(?:\/(\d+))?\]\s+(\d+\.\d+)\s+(\d+\.\d+)\s+(\d+\.\d+)\s*$/;

/** The switch-ins of `timehist` output (header and <idle> rows skipped), with the process (not thread) id of each. */
export function parseTimehist(text: string): SchedEvent[] {
  const events: SchedEvent[] = [];
  for (const line of text.split('\n')) {
    const match = ROW.exec(line);
    if (match === null) continue;
    events.push({ at: Number(match[1]), pid: Number(match[3] ?? match[2]), waitMs: Number(match[5]) });
  }
  return events;
}

/** The waits of `pids` within [from, to] (monotonic seconds), in ms. */
export function waitsOf(events: readonly SchedEvent[], pids: ReadonlySet<number>, from: number, to: number): number[] {
  const waits: number[] = [];
  for (const event of events) if (event.at >= from && event.at <= to && pids.has(event.pid)) waits.push(event.waitMs);
  return waits;
}

/** `pid` and its descendants (nginx's workers), for as long as they live; a process gone is left out. */
export function processTree(pid: number): number[] {
  let children: string;
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  } catch {
    return [];
  }
  return [pid, ...(children === '' ? [] : children.split(' ').flatMap((child) => processTree(Number(child))))];
}

/**
 * CPU time the hypervisor gave to other guests while this machine's CPUs had work (steal, all CPUs summed, from
 * /proc/stat in 1/100 s), in seconds. A stolen CPU stops whatever runs on it without any scheduler event in this
 * guest, so perf sched cannot see it; a window's steal is reported beside its waits.
 */
export function stealSeconds(stat = readFileSync('/proc/stat', 'utf8')): number {
  const fields = stat.slice(0, stat.indexOf('\n')).trim().split(/\s+/);
  // cpu user nice system idle iowait irq softirq steal ...
  if (fields[0] !== 'cpu' || fields[8] === undefined)
    throw new Error(`unexpected /proc/stat first line: ${fields.join(' ')}`);
  return Number(fields[8]) / 100;
}

/** The seconds of process.hrtime(), comparable with the recording's timestamps. */
export const monotonicSeconds = (): number => Number(process.hrtime.bigint()) / 1e9;

export interface SchedRecording {
  /** Stops the recording and returns every switch-in it traced. */
  stop(): Promise<SchedEvent[]>;
}

/** Starts `perf sched record` of the whole machine into `file`; resolves once perf is writing. */
export async function recordSched(file: string): Promise<SchedRecording> {
  const perf: ChildProcess = spawn('perf', ['sched', 'record', '-k', 'CLOCK_MONOTONIC', '-a', '-o', file], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  perf.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // perf writes its file on SIGINT and then ends by that signal (exit code null), which is success here.
  const exited = new Promise<boolean>((resolve) =>
    perf.once('exit', (code, signal) => resolve(code === 0 || signal === 'SIGINT')),
  );
  // perf writes its file header once the tracepoints are enabled; until then the first events would be missed.
  const deadline = Date.now() + 10_000;
  for (;;) {
    let size = 0;
    try {
      size = statSync(file).size;
    } catch {
      // not created yet
    }
    if (size > 0) break;
    if (perf.exitCode !== null || Date.now() > deadline) {
      perf.kill('SIGKILL');
      throw new Error(
        `perf sched record did not start: ${stderr.trim().split('\n').at(-1) ?? `exit ${perf.exitCode}`}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    async stop(): Promise<SchedEvent[]> {
      perf.kill('SIGINT');
      if (!(await exited))
        throw new Error(`perf sched record failed (exit ${perf.exitCode}): ${stderr.trim().split('\n').at(-1) ?? ''}`);
      const timehist = spawnSync('perf', ['sched', 'timehist', '-i', file], { encoding: 'utf8', maxBuffer: 1 << 30 });
      if (timehist.status !== 0)
        throw new Error(
          `perf sched timehist -i ${file} exited with ${timehist.status}: ${timehist.stderr.trim().split('\n').at(-1) ?? ''}`,
        );
      return parseTimehist(timehist.stdout);
    },
  };
}
