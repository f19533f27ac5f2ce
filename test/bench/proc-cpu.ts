// CPU time of benchmarked processes from /proc (Linux), in seconds. The scheduler's own count of each thread's time on
// a CPU (/proc/PID/task/TID/schedstat, nanoseconds) is read where the kernel has it: utime + stime in /proc/PID/stat
// come in clock ticks of 1/100 s (USER_HZ), 5-7 % of a cold one-second window at 500 req/s. The schedstat sum
// covers the threads alive when it is read; the processes measured here (Node, its worker threads, nginx's workers as
// child processes) keep theirs for their whole life.
import { readFileSync, readdirSync } from 'node:fs';

const CLOCK_TICKS_PER_SECOND = 100;

/** Seconds on a CPU (counted in nanoseconds) of every live thread of `pid`, or undefined where the kernel keeps no schedstat. */
function scheduledSeconds(pid: number): number | undefined {
  let nanoseconds = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8');
    } catch (error) {
      // A thread that exited between the listing and the read; a kernel without schedstat has none for any thread.
      if ((error as NodeJS.ErrnoException).code === 'ENOENT' && tid !== String(pid)) continue;
      return undefined;
    }
    nanoseconds += Number(text.slice(0, text.indexOf(' ')));
  }
  return nanoseconds / 1e9;
}

/** utime + stime of one process (every thread), in clock ticks' resolution. */
function tickSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
}

/** CPU seconds of one process (every thread); throws when the process is gone. */
export function processCpuSeconds(pid: number): number {
  return scheduledSeconds(pid) ?? tickSeconds(pid);
}

/** A process and its children (nginx's workers), in seconds; NaN when it is gone. */
export function treeCpuSeconds(pid: number): number {
  try {
    let seconds = processCpuSeconds(pid);
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    for (const child of children === '' ? [] : children.split(' ')) seconds += treeCpuSeconds(Number(child));
    return seconds;
  } catch {
    return NaN;
  }
}
