// The consumer -> provider link (the hop) on its own: what HTTP/1.1 and HTTP/2 over mutual TLS cost per
// request on each side, without either gateway, and HTTP/1.1 without TLS as the baseline that shows TLS's own share.
// The client is undici as the consumer gateway's hop pool uses it (HTTP/1.1: one request in flight per connection, as
// many connections as requests in flight; HTTP/2: one connection, the requests multiplexed on it); the server is Node's
// https or http2 secure server, as the provider gateway's listener would be (node:http for the cleartext baseline),
// answering a fixed chat completion after reading the request body. Each side's CPU per request: the server process
// from /proc, the client (this process) from process.cpuUsage(). Rounds alternate the protocols, each with a fresh
// server process, a warm-up and a measured window.
//
//   npm run bench:tls-link [-- --rounds 2 --concurrency 32 --window-ms 4000 --warmup-ms 3000]
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createSecureServer } from 'node:http2';
import type { IncomingMessage } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { benchArgs } from './bench-args.ts';
import { processCpuSeconds } from './proc-cpu.ts';
import { median } from './stats.ts';
import { PROVIDER_SNI, makePki, tempDir } from '../gateway/helpers.ts';

const USAGE = 'usage: npm run bench:tls-link -- [--rounds 2] [--concurrency 32] [--window-ms 4000] [--warmup-ms 3000]';
const PROTOCOLS = ['cleartext', 'http/1.1', 'h2'] as const;
type Protocol = (typeof PROTOCOLS)[number];
const REQUEST = JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'hello from the tls-link bench' }] });
const ANSWER = Buffer.from(
  JSON.stringify({
    id: 'chatcmpl-bench',
    object: 'chat.completion',
    model: 'm1',
    choices: [{ index: 0, message: { role: 'assistant', content: 'x'.repeat(400) }, finish_reason: 'stop' }],
  }),
);

/** The server side, run as its own process: `tls-link.bench.ts --serve PROTOCOL CERT KEY CA`; prints its port. */
function serve(protocol: Protocol, certPath: string, keyPath: string, caPath: string): void {
  const tls = {
    cert: readFileSync(certPath),
    key: readFileSync(keyPath),
    ca: readFileSync(caPath),
    requestCert: true,
    rejectUnauthorized: true,
  };
  // The same answer for both servers; only the response types differ.
  const answer = (
    req: IncomingMessage | Http2ServerRequest,
    res: { writeHead(status: number, headers: Record<string, string | number>): unknown; end(body: Buffer): unknown },
  ): void => {
    req.on('data', () => undefined);
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': ANSWER.length });
      res.end(ANSWER);
    });
  };
  const server =
    protocol === 'h2'
      ? createSecureServer(tls, (req, res) => answer(req, res))
      : protocol === 'cleartext'
        ? createHttpServer({ keepAliveTimeout: 75_000 }, (req, res) => answer(req, res))
        : createHttpsServer({ ...tls, keepAliveTimeout: 75_000 }, (req, res) => answer(req, res));
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    process.stdout.write(
      `${JSON.stringify({ port: typeof address === 'object' && address !== null ? address.port : 0 })}\n`,
    );
  });
  process.once('SIGTERM', () => process.exit(0));
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface Round {
  protocol: Protocol;
  rps: number;
  serverUs: number;
  clientUs: number;
  failed: number;
}

async function round(
  protocol: Protocol,
  pki: Awaited<ReturnType<typeof makePki>>,
  opts: { concurrency: number; windowMs: number; warmupMs: number },
): Promise<Round> {
  const server = spawn(
    process.execPath,
    [fileURLToPath(import.meta.url), '--serve', protocol, pki.providerCertPath, pki.providerKeyPath, pki.caPath],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  try {
    const port = await new Promise<number>((resolve, reject) => {
      server.once('exit', (code) => reject(new Error(`the ${protocol} server exited (${code}) before listening`)));
      server.stdout!.once('data', (chunk: Buffer) => resolve((JSON.parse(chunk.toString()) as { port: number }).port));
    });
    const connect = {
      ca: readFileSync(pki.caPath),
      cert: readFileSync(pki.edgeCertPath),
      key: readFileSync(pki.edgeKeyPath),
      servername: PROVIDER_SNI,
    };
    const pool =
      protocol === 'cleartext'
        ? new Pool(`http://127.0.0.1:${port}`, { connections: opts.concurrency, pipelining: 1 })
        : new Pool(
            `https://127.0.0.1:${port}`,
            protocol === 'h2'
              ? { allowH2: true, connections: 1, pipelining: opts.concurrency, connect }
              : { connections: opts.concurrency, pipelining: 1, connect },
          );
    let done = 0;
    let failed = 0;
    let stop = false;
    const worker = async (): Promise<void> => {
      while (!stop) {
        try {
          const res = await pool.request({
            path: '/v1/chat/completions',
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: REQUEST,
          });
          await res.body.dump();
          if (res.statusCode === 200) done++;
          else failed++;
        } catch {
          failed++;
        }
      }
    };
    const workers = Array.from({ length: opts.concurrency }, worker);
    await sleep(opts.warmupMs);
    const server0 = processCpuSeconds(server.pid!);
    const client0 = process.cpuUsage();
    const done0 = done;
    const failed0 = failed;
    const started = process.hrtime.bigint();
    await sleep(opts.windowMs);
    const requests = done - done0;
    const serverUs = ((processCpuSeconds(server.pid!) - server0) * 1e6) / Math.max(1, requests);
    const client = process.cpuUsage(client0);
    const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
    stop = true;
    await Promise.all(workers);
    await pool.close();
    return {
      protocol,
      rps: requests / elapsed,
      serverUs,
      clientUs: (client.user + client.system) / Math.max(1, requests),
      failed: failed - failed0,
    };
  } finally {
    server.kill('SIGTERM');
  }
}

async function main(): Promise<void> {
  const { values, positive, whole } = benchArgs('bench:tls-link', USAGE, {
    rounds: { type: 'string' },
    concurrency: { type: 'string' },
    'window-ms': { type: 'string' },
    'warmup-ms': { type: 'string' },
  });
  const opts = {
    rounds: whole('rounds', values.rounds, 2),
    concurrency: whole('concurrency', values.concurrency, 32),
    windowMs: positive('window-ms', values['window-ms'], 4000),
    warmupMs: positive('warmup-ms', values['warmup-ms'], 3000),
  };
  const { dir, cleanup } = await tempDir('tls-link');
  try {
    const pki = await makePki(dir);
    process.stdout.write(
      `# tls-link benchmark, ${new Date().toISOString()}: undici -> Node TLS server (mutual TLS), ${opts.concurrency} in flight, ${opts.warmupMs} ms warm-up and ${opts.windowMs} ms measured per round; load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}\n\n`,
    );
    process.stdout.write(
      '| round | protocol | connections | req/s | server CPU us/req | client CPU us/req | failed |\n|---|---|---|---|---|---|---|\n',
    );
    const rounds: Round[] = [];
    for (let i = 0; i < opts.rounds; i++) {
      for (const protocol of PROTOCOLS) {
        const r = await round(protocol, pki, opts);
        rounds.push(r);
        process.stdout.write(
          `| ${i + 1} | ${protocol} | ${protocol === 'h2' ? 1 : opts.concurrency} | ${r.rps.toFixed(0)} | ${r.serverUs.toFixed(1)} | ${r.clientUs.toFixed(1)} | ${r.failed} |\n`,
        );
      }
    }
    const both = (p: Protocol): number[] => rounds.filter((r) => r.protocol === p).map((r) => r.serverUs + r.clientUs);
    const [cleartext, http1, h2] = PROTOCOLS.map((p) => median(both(p)));
    process.stdout.write(
      `\nboth sides per request, median over rounds: cleartext http/1.1 ${cleartext!.toFixed(1)} us, http/1.1 over mTLS ${http1!.toFixed(1)} us (TLS adds ${(http1! - cleartext!).toFixed(1)} us, ${(http1! / cleartext!).toFixed(2)}x), h2 over mTLS ${h2!.toFixed(1)} us (h2 / http/1.1 ${(h2! / http1!).toFixed(2)}x); failed ${rounds.reduce((n, r) => n + r.failed, 0)}\n`,
    );
  } finally {
    await cleanup();
  }
}

if (process.argv[2] === '--serve')
  serve(process.argv[3] as Protocol, process.argv[4]!, process.argv[5]!, process.argv[6]!);
else await main();
