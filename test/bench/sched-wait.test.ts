// The scheduler-wait reading of `bench:gateway --sched`: perf's timehist rows to per-process waits in a window, and
// the hypervisor's steal from /proc/stat. Rows are as `perf sched timehist` printed them on this machine.
import { describe, expect, it } from 'vitest';
import { parseTimehist, processTree, stealSeconds, waitsOf } from './sched-wait.ts';

const TIMEHIST = [
  'Samples of sched_switch event do not have callchains.',
  '           time    cpu  task name                       wait time  sch delay   run time',
  '                        [tid/pid]                          (msec)     (msec)     (msec)',
  '--------------- ------  ------------------------------  ---------  ---------  ---------',
  '   84699.147214 [0000]  migration/0[18]                     0.000      0.014      0.045 ',
  '   84699.147509 [0000]  <idle>                              0.000      0.000      0.295 ',
  '   84699.230498 [0001]  V8Worker[15466/15458]               0.000      0.011      0.013 ',
  '   84699.230662 [0000]  node[15458]                         0.007      1.204      0.156 ',
  '   84699.231000 [0001]  V8 DefaultWorke[15470/15458]        0.100      2.600      0.010 ',
  '   84700.500000 [0001]  node[15477]                         3.000      0.250      0.500 ',
  '   84701.000000 [0000]  node[15458]                         1.000      5.000      0.100 ',
].join('\n');

describe('parseTimehist', () => {
  it('reads each switch-in with its process id (threads under their process) and its wait after the wakeup', () => {
    expect(parseTimehist(TIMEHIST)).toEqual([
      { at: 84699.147214, pid: 18, waitMs: 0.014 },
      { at: 84699.230498, pid: 15458, waitMs: 0.011 },
      { at: 84699.230662, pid: 15458, waitMs: 1.204 },
      { at: 84699.231, pid: 15458, waitMs: 2.6 },
      { at: 84700.5, pid: 15477, waitMs: 0.25 },
      { at: 84701, pid: 15458, waitMs: 5 },
    ]);
  });

  it('skips the header, <idle> rows and anything that is not a row', () => {
    expect(parseTimehist('')).toEqual([]);
    expect(parseTimehist('   84699.147509 [0000]  <idle>   0.000   0.000   0.295\nperf: some warning\n')).toEqual([]);
    // A row cut short (no run time) is not read as a wait.
    expect(parseTimehist('   84699.230662 [0000]  node[15458]   0.007   1.204')).toEqual([]);
  });
});

describe('waitsOf', () => {
  const events = parseTimehist(TIMEHIST);

  it("keeps only the given processes' waits inside the window, its ends included", () => {
    expect(waitsOf(events, new Set([15458]), 84699.2, 84700.9)).toEqual([0.011, 1.204, 2.6]);
    expect(waitsOf(events, new Set([15458, 15477]), 84699.230662, 84701)).toEqual([1.204, 2.6, 0.25, 5]);
  });

  it('is empty for a window before every event or for processes not traced', () => {
    expect(waitsOf(events, new Set([15458]), 1, 2)).toEqual([]);
    expect(waitsOf(events, new Set([1]), 0, Infinity)).toEqual([]);
  });
});

describe('stealSeconds', () => {
  it('reads the steal column of the all-CPU line in 1/100 s', () => {
    expect(
      stealSeconds('cpu  6444312 86305 1467302 8562613 24329 0 232929 59920 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n'),
    ).toBe(599.2);
  });

  it('refuses a first line that is not the all-CPU line or has no steal column, naming it', () => {
    expect(() => stealSeconds('cpu0 1 2 3 4 5 6 7 8\n')).toThrow(/unexpected \/proc\/stat first line: cpu0/);
    expect(() => stealSeconds('cpu 1 2 3 4 5 6 7\n')).toThrow(/unexpected \/proc\/stat first line/);
  });

  it('reads this machine', () => {
    expect(stealSeconds()).toBeGreaterThanOrEqual(0);
  });
});

describe('processTree', () => {
  it('is this process while it lives, and empty for a process that does not exist', () => {
    expect(processTree(process.pid)[0]).toBe(process.pid);
    expect(processTree(2 ** 22 + 1)).toEqual([]);
  });
});
