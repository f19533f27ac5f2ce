// CPU time of benchmarked processes from /proc (Linux): utime + stime of every thread, in seconds. Clock ticks are
// 1/100 s on Linux (USER_HZ), which bounds what a short window can resolve.
import { readFileSync } from 'node:fs';

const CLOCK_TICKS_PER_SECOND = 100;

/** utime + stime of one process (every thread), in seconds; throws when the process is gone. */
export function processCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
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
