// Instructions per request: the floor proxy and the consumer gateway each run under valgrind's callgrind,
// which counts the instructions the process executes (every thread). The same code measures within about 3 % from one
// run to the next (the JIT's choices differ between processes; a loaded machine changes how requests batch), where
// CPU time on this shared 2-core machine moves 10-50 % between windows a minute apart: compare a change with its base
// in the same run (--against), and confirm it in `npm run bench:gateway`.
//
// Each path: the proxy starts under callgrind with instrumentation off (about 5x slower, not 50x) and takes --warm
// requests (8 in flight, closed loop). Then instrumentation is switched on (`callgrind_control -i on`) and the counts
// are dumped (`callgrind_control -d`) after every --requests requests, until two consecutive windows agree within 2 %
// (steady state; at most --max-windows). Under valgrind the JIT takes far longer to settle than at full speed: after
// 3 000 warm-up requests the floor still cost 338 000 instructions per request, after 12 000 219 000, after 30 000
// 197 000, so a single window after a short warm-up measured compilation as much as the request path. (Switching
// instrumentation off between windows corrupted callgrind's totals here, so the windows follow each other.) The upstream is the sim, outside valgrind. `--against DIR` (repeatable) adds the gateway of another
// checkout (e.g. a `git worktree` of an older commit with node_modules linked) to compare versions of the request path.
//
// `--hop` measures the two sides of the mutual-TLS hop instead, each against its own floor: the consumer gateway
// forwarding to a provider gateway (which runs at full speed) against a floor proxy forwarding over the same mTLS to a
// floor proxy; then the provider gateway, fed by a consumer gateway at full speed, against a floor proxy listening on
// mTLS, fed by a floor proxy. `bench:gateway` can tell only the two together apart from a rate effect (each process of
// a hop runs at the hop's lower rate, where every request costs more); here each side is counted on its own.
//
//   npm run bench:gateway-instructions [-- --warm 20000 --requests 2000 --max-windows 5 --rounds 1 --hop --against DIR ...]
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join, relative as relativePath, resolve } from 'node:path';
import { Pool } from 'undici';
import { ensureDebianPackages } from '../../image/debian-tools.ts';
import { benchArgs } from './bench-args.ts';
import { floorListenTls, floorUpstreamTls } from './floor-hop.ts';
import { median } from './stats.ts';
import { stableId } from '../../schemas/fnv1a.ts';
import {
  PROVIDER_SNI,
  ROOT,
  candidate,
  consumerConfig,
  makePki,
  payload,
  providerConfig,
  spawnDaemon,
  tempDir,
  waitForPort,
  writeOverlay,
  type Daemon,
} from '../gateway/helpers.ts';

const USAGE =
  'usage: npm run bench:gateway-instructions -- [--warm 20000] [--requests 2000] [--max-windows 5] [--rounds 1] [--hop] [--against DIR]...';
/** Two consecutive windows within this fraction of each other: steady state. */
const AGREE = 0.02;
const IN_FLIGHT = 8;
const BODY = JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'hello' }] });

interface Path {
  readonly name: string;
  /** The measured process: a script and its arguments, run under callgrind. */
  readonly argv: string[];
  /** The path's floor, by name: what its ratio is taken against. */
  readonly floor: string;
  /**
   * A process at full speed in front of the measured one (the other side of the hop), given the measured process's
   * port; the load goes to it. Without one, the load goes to the measured process.
   */
  readonly front?: (measuredPort: number) => Promise<{ port: number; daemon: Daemon }>;
}

/** Where each kind of measured process logs its port: the consumer's edge, the floor proxy, the provider listener. */
const LISTENING =
  /"listener":"(?:edge|floor|provider)"[^}]*"port":(\d+)|"port":(\d+)[^}]*"listener":"(?:edge|floor|provider)"/;

/** valgrind from Debian when it is missing (a fresh machine); else the reason, and exit 1. */
function ensureValgrind(): void {
  try {
    ensureDebianPackages(['valgrind']);
  } catch (error) {
    process.stderr.write(
      `bench:gateway-instructions: valgrind is not installed and apt-get could not install it (${(error as Error).message.split('\n')[0]})\n`,
    );
    process.exit(1);
  }
}

async function closedLoop(pool: Pool, requests: number): Promise<number> {
  let left = requests;
  let failed = 0;
  const worker = async (): Promise<void> => {
    while (left-- > 0) {
      try {
        const res = await pool.request({
          path: '/v1/chat/completions',
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: BODY,
        });
        await res.body.dump();
        if (res.statusCode !== 200) failed++;
      } catch {
        failed++;
      }
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  return failed;
}

const control = (args: string[]): Promise<void> =>
  new Promise((done, fail) =>
    spawn('callgrind_control', args, { stdio: 'ignore' }).on('exit', (code) =>
      code === 0 ? done() : fail(new Error(`callgrind_control ${args.join(' ')} exited ${code}`)),
    ),
  );

interface Measured {
  /** Instructions per request of the last window (the steady one, unless `steady` is false). */
  readonly perRequest: number;
  /** Every window's instructions per request, in order. */
  readonly windows: readonly number[];
  readonly steady: boolean;
  readonly failed: number;
}

/** Instructions counted since the last dump: asks for a dump and reads the new file(s) callgrind wrote. */
async function dumpInstructions(pid: number, out: string, seen: Set<string>): Promise<number> {
  await control(['-d', String(pid)]);
  let instructions = 0;
  for (const file of readdirSync(out)) {
    if (seen.has(file)) continue;
    const dump = readFileSync(join(out, file), 'utf8');
    const summary = /^summary: (\d+)/m.exec(dump);
    // The dump callgrind_control asked for; the one written at exit holds only the shutdown.
    if (summary === null || !/^desc: Trigger: dump/m.test(dump)) continue;
    seen.add(file);
    instructions += Number(summary[1]);
  }
  if (instructions === 0) throw new Error(`no new callgrind dump with a summary in ${out}`);
  return instructions;
}

/** One path under callgrind: instructions per request in windows of `requests` until two agree within AGREE. */
async function measure(
  path: Path,
  dir: string,
  opts: { warm: number; requests: number; maxWindows: number },
): Promise<Measured> {
  const out = join(dir, `cg-${path.name.replace(/\W+/g, '-')}-${Date.now()}`);
  await mkdir(out);
  const proc = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--smc-check=all-non-file',
      '--instr-atstart=no',
      `--callgrind-out-file=${out}/callgrind.%p`,
      process.execPath,
      ...path.argv,
    ],
    {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      // The gateway's own warm-up would take minutes under valgrind; the warm phase below replaces it.
      env: { ...process.env, LOG_LEVEL: 'info', AGN_GATEWAY_WARMUP_REQUESTS: '0' },
    },
  );
  proc.stderr!.resume();
  let front: Daemon | undefined;
  try {
    let text = '';
    const measuredPort = await new Promise<number>((resolvePort, reject) => {
      proc.once('exit', (code) => reject(new Error(`${path.name} exited (${code}) before listening`)));
      proc.stdout!.on('data', (chunk: Buffer) => {
        text += chunk.toString();
        const match = LISTENING.exec(text);
        if (match !== null) resolvePort(Number(match[1] ?? match[2]));
      });
    });
    let port = measuredPort;
    if (path.front !== undefined) ({ port, daemon: front } = await path.front(measuredPort));
    const pool = new Pool(`http://127.0.0.1:${port}`, { connections: IN_FLIGHT, pipelining: 1 });
    let failed = await closedLoop(pool, opts.warm);
    const windows: number[] = [];
    const seen = new Set<string>();
    let steady = false;
    await control(['-i', 'on', String(proc.pid)]);
    while (!steady && windows.length < opts.maxWindows) {
      failed += await closedLoop(pool, opts.requests);
      windows.push((await dumpInstructions(proc.pid!, out, seen)) / opts.requests);
      const [previous, last] = windows.slice(-2);
      steady = windows.length >= 2 && Math.abs(last! - previous!) <= AGREE * previous!;
    }
    await pool.close();
    return { perRequest: windows.at(-1)!, windows, steady, failed };
  } finally {
    await front?.stop();
    proc.kill('SIGTERM');
    if (proc.exitCode === null) await new Promise((done) => proc.once('exit', done));
  }
}

const FLOOR = 'floor (minimal Node proxy)';
const FLOOR_EDGE = 'floor edge (forwards over mTLS)';
const FLOOR_PROVIDER = 'floor provider (listens on mTLS)';
const CONSUMER_HOP = 'consumer gateway (forwards over mTLS)';
const PROVIDER = 'provider gateway';
const credential = {
  strategy: 'bearer_token' as const,
  secretRef: { name: 'sim-token', namespace: 'grid-system', key: 'token' },
};
const gatewayScript = (checkout: string): string => join(checkout, 'daemons/gateway/main.ts');
const floorScript = join(ROOT, 'test/bench/floor-proxy.ts');

/** The floor proxy and the consumer gateway (and other checkouts' consumers), each straight to the sim. */
async function consumerPaths(dir: string, tokenFile: string, simPort: number, against: string[]): Promise<Path[]> {
  const overlay = join(dir, 'overlay.json');
  await writeOverlay(overlay, payload([{ ...candidate('m1', 'local', 'sim'), credential }]));
  const config = join(dir, 'consumer.json');
  await writeFile(
    config,
    JSON.stringify(
      consumerConfig({
        overlayPath: overlay,
        credentials: [{ name: 'sim-token', namespace: 'grid-system', key: 'token', file: tokenFile }],
        clusters: [{ name: 'sim', endpoints: [`127.0.0.1:${simPort}`] }],
      }),
    ),
  );
  return [
    {
      name: FLOOR,
      floor: FLOOR,
      argv: [floorScript, '--upstream', `m1=127.0.0.1:${simPort}`, '--token-file', tokenFile],
    },
    { name: 'consumer gateway', floor: FLOOR, argv: [gatewayScript(ROOT), '--config', config] },
    ...against.map((checkout) => ({
      name: `consumer gateway of ${checkout}`,
      floor: FLOOR,
      argv: [gatewayScript(checkout), '--config', config],
    })),
  ];
}

/**
 * Both sides of the mTLS hop, each against its own floor; the far side of each runs at full speed. The floor pair is
 * bench:gateway's floor hop (client certificate, SNI, requestCert), the gateway pair its consumer -> provider path.
 */
async function hopPaths(
  dir: string,
  tokenFile: string,
  simPort: number,
  against: string[],
  started: Daemon[],
): Promise<Path[]> {
  const pki = await makePki(dir);
  const listenTls = floorListenTls(pki);
  const upstreamTls = floorUpstreamTls(pki);
  const floorEdgeArgv = (port: number): string[] => [
    floorScript,
    '--upstream',
    `m1=127.0.0.1:${port}`,
    '--token-file',
    tokenFile,
    ...upstreamTls,
  ];
  const floorProviderArgv = [
    floorScript,
    '--upstream',
    `m1=127.0.0.1:${simPort}`,
    '--token-file',
    tokenFile,
    ...listenTls,
  ];

  const providerJson = join(dir, 'provider.json');
  await writeFile(
    providerJson,
    JSON.stringify(
      providerConfig({
        pki,
        routes: [
          {
            candidate_id: stableId('inference_model', 'm1', 'east', 'prov'),
            model: 'm1',
            cluster: 'backend',
            paths: ['/v1/chat/completions'],
            credential: { secretRef: credential.secretRef },
          },
        ],
        credentials: [{ name: 'sim-token', namespace: 'grid-system', key: 'token', file: tokenFile }],
        clusters: [{ name: 'backend', endpoints: [`127.0.0.1:${simPort}`] }],
      }),
    ),
  );
  const overlay = join(dir, 'overlay-hop.json');
  await writeOverlay(overlay, payload([candidate('m1', 'east', 'prov')]));
  /** A consumer config forwarding to the provider gateway on `port`. */
  const consumerHop = async (port: number): Promise<string> => {
    const file = join(dir, `consumer-hop-${port}.json`);
    const tls = {
      ca: { ca_path: pki.caPath },
      client_cert: { cert_path: pki.edgeCertPath, key_path: pki.edgeKeyPath },
      sni: PROVIDER_SNI,
    };
    await writeFile(
      file,
      JSON.stringify(
        consumerConfig({
          overlayPath: overlay,
          hops: ['prov'],
          clusters: [{ name: 'prov', endpoints: [`127.0.0.1:${port}`], tls }],
        }),
      ),
    );
    return file;
  };
  const relative = (argv: string[]): [string, string[]] => [relativePath(ROOT, argv[0]!), argv.slice(1)];

  // The far side for the two edge paths, at full speed for the whole run.
  const floorProvider = spawnDaemon(...relative(floorProviderArgv));
  started.push(floorProvider);
  const provider = spawnDaemon('daemons/gateway/main.ts', ['--config', providerJson]);
  started.push(provider);
  const consumerToProvider = await consumerHop(await waitForPort(provider, 'provider'));
  const floorProviderPort = await waitForPort(floorProvider, 'floor');

  // The near side for the two provider paths, started once the measured process listens.
  const floorFront = async (port: number): Promise<{ port: number; daemon: Daemon }> => {
    const daemon = spawnDaemon(...relative(floorEdgeArgv(port)));
    return { port: await waitForPort(daemon, 'floor'), daemon };
  };
  const consumerFront = async (port: number): Promise<{ port: number; daemon: Daemon }> => {
    const daemon = spawnDaemon('daemons/gateway/main.ts', ['--config', await consumerHop(port)]);
    return { port: await waitForPort(daemon, 'edge'), daemon };
  };
  return [
    { name: FLOOR_EDGE, floor: FLOOR_EDGE, argv: floorEdgeArgv(floorProviderPort) },
    { name: CONSUMER_HOP, floor: FLOOR_EDGE, argv: [gatewayScript(ROOT), '--config', consumerToProvider] },
    ...against.map((checkout) => ({
      name: `${CONSUMER_HOP} of ${checkout}`,
      floor: FLOOR_EDGE,
      argv: [gatewayScript(checkout), '--config', consumerToProvider],
    })),
    { name: FLOOR_PROVIDER, floor: FLOOR_PROVIDER, argv: floorProviderArgv, front: floorFront },
    {
      name: PROVIDER,
      floor: FLOOR_PROVIDER,
      argv: [gatewayScript(ROOT), '--config', providerJson],
      front: consumerFront,
    },
    ...against.map((checkout) => ({
      name: `${PROVIDER} of ${checkout}`,
      floor: FLOOR_PROVIDER,
      argv: [gatewayScript(checkout), '--config', providerJson],
      front: consumerFront,
    })),
  ];
}

async function main(): Promise<void> {
  const { values, whole, fail } = benchArgs('bench:gateway-instructions', USAGE, {
    warm: { type: 'string' },
    requests: { type: 'string' },
    'max-windows': { type: 'string' },
    rounds: { type: 'string' },
    against: { type: 'string', multiple: true },
    hop: { type: 'boolean' },
  });
  const opts = {
    warm: whole('warm', values.warm, 20_000),
    requests: whole('requests', values.requests, 2000),
    maxWindows: Math.max(2, whole('max-windows', values['max-windows'], 5)),
  };
  const rounds = whole('rounds', values.rounds, 1);
  const against = (values.against ?? []).map((dir) => resolve(dir));
  for (const dir of against) {
    if (!existsSync(join(dir, 'daemons/gateway/main.ts'))) fail(`--against ${dir} has no daemons/gateway/main.ts`);
  }
  ensureValgrind();
  const { dir, cleanup } = await tempDir('gw-instr');
  try {
    const tokenFile = join(dir, 'sim-token');
    await writeFile(tokenFile, 'bench-token');
    // Engine steps that take no time: the benchmark measures the gateway, not a model of a GPU.
    const sim = spawnDaemon('daemons/sim/main.ts', [
      '--name',
      'sim',
      '--models',
      'm1',
      '--token-file',
      tokenFile,
      '--step-overhead-ms',
      '0',
      '--prefill-ms-per-token',
      '0',
      '--decode-ms-per-seq',
      '0',
    ]);
    /** Processes the paths start once for the whole run (the far side of the hop). */
    const stops: Daemon[] = [];
    try {
      const simPort = await waitForPort(sim, 'sim');
      const paths =
        values.hop === true
          ? await hopPaths(dir, tokenFile, simPort, against, stops)
          : await consumerPaths(dir, tokenFile, simPort, against);
      process.stdout.write(
        `# gateway instructions benchmark, ${new Date().toISOString()}: node ${process.version}, callgrind, ${IN_FLIGHT} in flight, ${opts.warm} warm-up requests, then consecutive windows of ${opts.requests} counted requests until two agree within ${AGREE * 100} % (at most ${opts.maxWindows})\n\n`,
      );
      process.stdout.write(
        '| round | path | instructions/request (steady window) | vs its floor | windows, in order |\n|---|---|---|---|---|\n',
      );
      const results = new Map<string, number[]>(paths.map((p) => [p.name, []]));
      let failed = 0;
      const unsteady: string[] = [];
      for (let round = 1; round <= rounds; round++) {
        for (const path of paths) {
          const result = await measure(path, dir, opts);
          failed += result.failed;
          if (!result.steady) unsteady.push(`${path.name} (round ${round})`);
          results.get(path.name)!.push(result.perRequest);
          const floor = results.get(path.floor)!.at(-1)!;
          const windows = result.windows.map((w) => w.toFixed(0)).join(', ');
          process.stdout.write(
            `| ${round} | ${path.name} | ${result.perRequest.toFixed(0)}${result.steady ? '' : ' (not steady)'} | ${(result.perRequest / floor).toFixed(3)} | ${windows} |\n`,
          );
        }
      }
      const medianOf = (name: string): number => median(results.get(name)!);
      process.stdout.write('\n');
      for (const path of paths.filter((p) => p.floor !== p.name)) {
        const m = medianOf(path.name);
        process.stdout.write(
          `${path.name}: ${m.toFixed(0)} instructions/request, ${(m / medianOf(path.floor)).toFixed(3)}x ${path.floor} (${medianOf(path.floor).toFixed(0)}), medians over ${rounds} rounds\n`,
        );
      }
      if (values.hop === true) {
        // The hop as bench:gateway adds it up: both sides together against both floors together.
        const floorHop = medianOf(FLOOR_EDGE) + medianOf(FLOOR_PROVIDER);
        const hop = medianOf(CONSUMER_HOP) + medianOf(PROVIDER);
        process.stdout.write(
          `both gateways of the hop: ${hop.toFixed(0)} instructions/request, ${(hop / floorHop).toFixed(3)}x both floor proxies (${floorHop.toFixed(0)})\n`,
        );
      }
      process.stdout.write(`failed requests: ${failed}\n`);
      if (unsteady.length > 0)
        process.stdout.write(
          `not steady within ${opts.maxWindows} windows (the figure is the last window): ${unsteady.join('; ')}\n`,
        );
      if (failed > 0) process.exitCode = 1;
    } finally {
      await Promise.all([sim, ...stops].map((daemon) => daemon.stop()));
    }
  } finally {
    await cleanup();
  }
}

await main();
