// A live SWIM member in its own process, for the fuzz suites: the suite is the attacker, so the member's memory,
// descriptors and event loop are measured apart from the generator's. Reads the key from GRID_SWIM_ENCRYPT_KEY,
// prints its address as the first stdout line, logs drops as JSON lines, and answers IPC: "stats", "stop".
//
// Two measures of the event loop: the wall-clock delay (monitorEventLoopDelay), which on a shared machine also
// counts time the OS gave to other processes, and the busy stall: for each gap between two ticks of a 10 ms timer,
// the CPU time this thread itself spent in the gap. Only the second says the member blocked its own loop.
import { readdirSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { KeyRing, parseHexKey } from '../../../daemons/gossip-operator/swim/keyring.ts';
import { Membership } from '../../../daemons/gossip-operator/swim/membership.ts';
import { transportBounds, UdpTransport } from '../../../daemons/gossip-operator/swim/udp-transport.ts';
import { testTiming } from '../helpers.ts';

const key = parseHexKey(process.env['GRID_SWIM_ENCRYPT_KEY'] ?? '', 'GRID_SWIM_ENCRYPT_KEY');
delete process.env['GRID_SWIM_ENCRYPT_KEY'];
const config = { ...testTiming({ pushPullTimeoutMs: 1_000 }), name: 'target' };
const transport = await UdpTransport.bind({ bindHost: '127.0.0.1', bindPort: 0, ...transportBounds(config) });
const log = (level: string) => (obj: object, msg: string) =>
  process.stdout.write(`${JSON.stringify({ level, ...obj, msg })}\n`);
const membership = Membership.start({
  config,
  transport,
  keyring: new KeyRing([key]),
  logger: { warn: log('warn'), debug: log('debug') },
});
const delay = monitorEventLoopDelay({ resolution: 10 });
delay.enable();
const TICK_MS = 10;
let maxBusyStallMs = 0;
let lastTick = performance.now();
let lastCpu = process.threadCpuUsage();
setInterval(() => {
  const now = performance.now();
  const cpu = process.threadCpuUsage();
  const busyMs = (cpu.user - lastCpu.user + cpu.system - lastCpu.system) / 1_000;
  maxBusyStallMs = Math.max(maxBusyStallMs, Math.min(now - lastTick, busyMs));
  lastTick = now;
  lastCpu = cpu;
}, TICK_MS).unref();
process.stdout.write(`${membership.address}\n`);

process.on('message', (m: { cmd: string }) => {
  if (m.cmd === 'stats') {
    const s = membership.stats();
    process.send?.({
      rss: process.memoryUsage.rss(),
      fds: readdirSync('/proc/self/fd').length,
      maxDelayMs: delay.max / 1e6,
      maxBusyStallMs,
      drops: s.drops,
      packetsReceived: s.transport.packetsReceived,
      inboundStreams: s.transport.inboundStreams,
      inboundBufferedBytes: s.transport.inboundBufferedBytes,
      members: membership.members().length,
    });
    delay.reset();
    maxBusyStallMs = 0;
  } else if (m.cmd === 'stop') {
    void membership.shutdown().then(() => process.exit(0));
  }
});
