// Gateway benchmark: one load generator, four paths to the same sim backend, measured in one run.
//   npm run bench:gateway [-- --duration-ms 6000 --concurrency 32]
// Paths: direct to sim; through the consumer gateway (plaintext, consumer-injected credential); consumer ->
// provider over mTLS -> sim; and nginx proxy_pass -> sim when nginx is installed. Every server is its own
// process; the load generator (this process) keeps a fixed number of requests in flight over keep-alive
// connections and records each request's latency. Prints requests/s, p50/p99 and the ratios to direct.
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { stableId } from '../../schemas/fnv1a.ts';
import {
  PROVIDER_SNI,
  candidate,
  chatBody,
  consumerConfig,
  makePki,
  payload,
  providerConfig,
  spawnDaemon,
  tempDir,
  waitFor,
  waitForPort,
  writeOverlay,
} from '../gateway/helpers.ts';
import type { Daemon } from '../gateway/helpers.ts';

const { values } = parseArgs({
  options: { 'duration-ms': { type: 'string' }, 'warmup-ms': { type: 'string' }, concurrency: { type: 'string' } },
});
const DURATION_MS = Number(values['duration-ms'] ?? 6000);
const WARMUP_MS = Number(values['warmup-ms'] ?? 1500);
const CONCURRENCY = Number(values.concurrency ?? 32);
const TOKEN = 'bench-backend-token';
const BODY = JSON.stringify(chatBody('m1'));

interface Result {
  name: string;
  requests: number;
  errors: number;
  rps: number;
  p50: number;
  p99: number;
  /** CPU time the proxy processes (not the sim) spent per request, microseconds: robust to a busy machine. */
  proxyCpuUs: number;
}

const CLOCK_TICKS_PER_SECOND = 100;

/** utime + stime of a process and its children (nginx workers), in seconds, from /proc. */
function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    let ticks = Number(fields[11]) + Number(fields[12]);
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    for (const child of children === '' ? [] : children.split(' ')) ticks += cpuSeconds(Number(child)) * CLOCK_TICKS_PER_SECOND;
    return ticks / CLOCK_TICKS_PER_SECOND;
  } catch {
    return NaN;
  }
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** Closed-loop load: CONCURRENCY requests in flight, each worker sending its next request when one completes. */
async function measure(name: string, origin: string, headers: Record<string, string>, proxyPids: number[]): Promise<Result> {
  const pool = new Pool(origin, { connections: CONCURRENCY, pipelining: 1, keepAliveTimeout: 30_000 });
  const latencies: number[] = [];
  let errors = 0;
  let recording = false;
  let stop = false;
  const worker = async (): Promise<void> => {
    while (!stop) {
      const started = process.hrtime.bigint();
      try {
        const res = await pool.request({ path: '/v1/chat/completions', method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: BODY });
        await res.body.dump();
        if (res.statusCode !== 200) throw new Error(String(res.statusCode));
        if (recording) latencies.push(Number(process.hrtime.bigint() - started) / 1e6);
      } catch {
        if (recording) errors++;
      }
    }
  };
  const workers = Array.from({ length: CONCURRENCY }, worker);
  await new Promise((r) => setTimeout(r, WARMUP_MS));
  const cpuBefore = proxyPids.reduce((sum, pid) => sum + cpuSeconds(pid), 0);
  recording = true;
  const t0 = process.hrtime.bigint();
  await new Promise((r) => setTimeout(r, DURATION_MS));
  recording = false;
  const cpuAfter = proxyPids.reduce((sum, pid) => sum + cpuSeconds(pid), 0);
  const elapsedS = Number(process.hrtime.bigint() - t0) / 1e9;
  stop = true;
  await Promise.all(workers);
  await pool.close();
  const sorted = Float64Array.from(latencies).sort();
  return {
    name,
    requests: latencies.length,
    errors,
    rps: latencies.length / elapsedS,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    proxyCpuUs: proxyPids.length === 0 ? 0 : ((cpuAfter - cpuBefore) * 1e6) / Math.max(1, latencies.length),
  };
}

function nginxBinary(): string | undefined {
  for (const candidatePath of ['/usr/sbin/nginx', '/usr/bin/nginx', '/usr/local/sbin/nginx', '/usr/local/nginx/sbin/nginx']) {
    try {
      execFileSync(candidatePath, ['-v'], { stdio: 'ignore' });
      return candidatePath;
    } catch {
      // not there
    }
  }
  return undefined;
}

async function main(): Promise<void> {
  const { dir, cleanup } = await tempDir('bench');
  const daemons: Daemon[] = [];
  let nginx: ReturnType<typeof spawn> | undefined;
  try {
    const pki = await makePki(dir);
    await writeFile(join(dir, 'sim-token'), TOKEN);
    const sim = spawnDaemon('daemons/sim/main.ts', ['--name', 'sim', '--models', 'm1', '--token-file', join(dir, 'sim-token')]);
    daemons.push(sim);
    const simPort = await waitForPort(sim, 'sim');

    const overlayDirect = join(dir, 'overlay-direct.json');
    await writeOverlay(overlayDirect, payload([{ ...candidate('m1', 'local', 'sim'), credential: { strategy: 'bearer_token', secretRef: { name: 'sim-token', namespace: 'grid-system', key: 'token' } } }]));
    const consumerPlain = join(dir, 'consumer-plain.json');
    await writeFile(
      consumerPlain,
      JSON.stringify(
        consumerConfig({
          overlayPath: overlayDirect,
          credentials: [{ name: 'sim-token', namespace: 'grid-system', key: 'token', file: join(dir, 'sim-token') }],
          clusters: [{ name: 'sim', endpoints: [`127.0.0.1:${simPort}`] }],
        }),
      ),
    );
    const plain = spawnDaemon('daemons/gateway/main.ts', ['--config', consumerPlain]);
    daemons.push(plain);

    const providerJson = join(dir, 'provider.json');
    await writeFile(
      providerJson,
      JSON.stringify(
        providerConfig({
          pki,
          routes: [{ candidate_id: stableId('inference_model', 'm1', 'east', 'prov'), model: 'm1', cluster: 'backend', paths: ['/v1/chat/completions'], credential: { secretRef: { name: 'cred', namespace: 'grid-system', key: 'token' } } }],
          credentials: [{ name: 'cred', namespace: 'grid-system', key: 'token', file: join(dir, 'sim-token') }],
          clusters: [{ name: 'backend', endpoints: [`127.0.0.1:${simPort}`] }],
        }),
      ),
    );
    const provider = spawnDaemon('daemons/gateway/main.ts', ['--config', providerJson]);
    daemons.push(provider);
    const providerPort = await waitForPort(provider, 'provider');

    const overlayHop = join(dir, 'overlay-hop.json');
    await writeOverlay(overlayHop, payload([candidate('m1', 'east', 'prov')]));
    const consumerHop = join(dir, 'consumer-hop.json');
    await writeFile(
      consumerHop,
      JSON.stringify(
        consumerConfig({
          overlayPath: overlayHop,
          hops: ['prov'],
          clusters: [
            {
              name: 'prov',
              endpoints: [`127.0.0.1:${providerPort}`],
              tls: { ca: { ca_path: pki.caPath }, client_cert: { cert_path: pki.edgeCertPath, key_path: pki.edgeKeyPath }, sni: PROVIDER_SNI },
            },
          ],
        }),
      ),
    );
    const hop = spawnDaemon('daemons/gateway/main.ts', ['--config', consumerHop]);
    daemons.push(hop);
    const plainPort = await waitForPort(plain, 'edge');
    const hopPort = await waitForPort(hop, 'edge');
    for (const [d, name] of [[plain, 'plain'], [hop, 'hop']] as const) {
      const admin = await waitForPort(d, 'admin');
      await waitFor(`${name} consumer ready`, async () => {
        const res = await fetch(`http://127.0.0.1:${admin}/readyz`);
        return res.status === 200 ? true : undefined;
      });
    }

    let nginxPort: number | undefined;
    const nginxBin = nginxBinary();
    if (nginxBin !== undefined) {
      const prefix = join(dir, 'nginx');
      await mkdir(join(prefix, 'logs'), { recursive: true });
      nginxPort = 20_000 + Math.floor(Math.random() * 20_000);
      await writeFile(
        join(prefix, 'nginx.conf'),
        `worker_processes 1;
pid ${prefix}/nginx.pid;
error_log ${prefix}/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${prefix}/body;
  proxy_temp_path ${prefix}/proxy;
  fastcgi_temp_path ${prefix}/fastcgi;
  uwsgi_temp_path ${prefix}/uwsgi;
  scgi_temp_path ${prefix}/scgi;
  upstream sim { server 127.0.0.1:${simPort}; keepalive 64; }
  server {
    listen 127.0.0.1:${nginxPort};
    location / {
      proxy_pass http://sim;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "Bearer ${TOKEN}";
      proxy_buffering off;
    }
  }
}
`,
      );
      nginx = spawn(nginxBin, ['-p', prefix, '-c', join(prefix, 'nginx.conf'), '-g', 'daemon off;'], { stdio: 'ignore' });
      const port = nginxPort;
      await waitFor('nginx', async () => {
        const res = await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined);
        return res?.status === 200 ? true : undefined;
      });
    }

    process.stdout.write(
      `gateway benchmark: ${CONCURRENCY} requests in flight, ${WARMUP_MS} ms warm-up + ${DURATION_MS} ms measured per path, ` +
        `non-streaming chat completions (16 tokens), node ${process.version}, ${cpus().length} CPUs` +
        `${nginxBin === undefined ? ', nginx not installed (skipped)' : ', nginx worker_processes 1'}\n\n`,
    );
    const results: Result[] = [];
    const pid = (d: Daemon): number => d.proc.pid ?? -1;
    results.push(await measure('direct to sim', `http://127.0.0.1:${simPort}`, { authorization: `Bearer ${TOKEN}` }, []));
    results.push(await measure('consumer (plaintext) -> sim', `http://127.0.0.1:${plainPort}`, {}, [pid(plain)]));
    results.push(await measure('consumer -> provider (mTLS) -> sim', `http://127.0.0.1:${hopPort}`, {}, [pid(hop), pid(provider)]));
    if (nginxPort !== undefined && nginx?.pid !== undefined) {
      results.push(await measure('nginx proxy_pass -> sim', `http://127.0.0.1:${nginxPort}`, {}, [nginx.pid]));
    }

    const direct = results[0]!;
    const pad = (s: string, n: number): string => s.padEnd(n);
    process.stdout.write(`${pad('path', 38)}${pad('req/s', 10)}${pad('p50 ms', 10)}${pad('p99 ms', 10)}${pad('errors', 8)}${pad('rps vs direct', 15)}proxy CPU us/req\n`);
    for (const r of results) {
      process.stdout.write(
        `${pad(r.name, 38)}${pad(r.rps.toFixed(0), 10)}${pad(r.p50.toFixed(2), 10)}${pad(r.p99.toFixed(2), 10)}${pad(String(r.errors), 8)}` +
          `${pad((r.rps / direct.rps).toFixed(2), 15)}${r.proxyCpuUs === 0 ? '-' : r.proxyCpuUs.toFixed(0)}\n`,
      );
    }
    const byName = new Map(results.map((r) => [r.name, r]));
    const ratio = (a: string, b: string): string => {
      const x = byName.get(a);
      const y = byName.get(b);
      return x === undefined || y === undefined ? 'n/a' : (x.rps / y.rps).toFixed(2);
    };
    process.stdout.write(
      `\nratios (req/s): consumer/direct ${ratio('consumer (plaintext) -> sim', 'direct to sim')}, ` +
        `mTLS hop/consumer ${ratio('consumer -> provider (mTLS) -> sim', 'consumer (plaintext) -> sim')}, ` +
        `consumer/nginx ${ratio('consumer (plaintext) -> sim', 'nginx proxy_pass -> sim')}\n` +
        `load average at the end: ${loadavg().map((l) => l.toFixed(2)).join(' ')} (other work on the machine skews req/s; CPU us/req is steadier)\n`,
    );
  } finally {
    nginx?.kill('SIGTERM');
    await Promise.all(daemons.map((d) => d.stop()));
    await cleanup();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:gateway failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
