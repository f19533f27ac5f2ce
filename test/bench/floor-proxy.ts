// The runtime floor of the gateway benchmark: the least a consumer gateway must do on Node 24, and nothing more.
// node:http server, read the body, JSON.parse it for `model`, pick that model's upstream, forward over an undici
// Pool with keep-alive, stream the response back chunk by chunk. No routing table, filters, metrics or logs: what
// the gateway costs above this is what its features cost. Two of them make the floor of the provider hop: one
// forwarding over mutual TLS (--upstream-tls) to one listening on it (--listen-tls), as the consumer and provider
// gateways do.
//   node test/bench/floor-proxy.ts --upstream m1=127.0.0.1:PORT[,m2=HOST:PORT] --token-file FILE
//     [--listen-tls CERT,KEY,CA] [--upstream-tls CA,CERT,KEY,SERVERNAME]
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';

const USAGE =
  'usage: node test/bench/floor-proxy.ts --upstream MODEL=HOST:PORT[,MODEL=HOST:PORT] --token-file FILE [--port 0] [--listen-tls CERT,KEY,CA] [--upstream-tls CA,CERT,KEY,SERVERNAME]';
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding']);

function main(): number {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        upstream: { type: 'string' },
        'token-file': { type: 'string' },
        port: { type: 'string' },
        'listen-tls': { type: 'string' },
        'upstream-tls': { type: 'string' },
        help: { type: 'boolean' },
      },
      strict: true,
    }));
  } catch (error) {
    process.stderr.write(`floor-proxy: ${(error as Error).message} (${USAGE})\n`);
    return 2;
  }
  if (values.help === true) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (values.upstream === undefined || values['token-file'] === undefined) {
    process.stderr.write(`floor-proxy: --upstream and --token-file are required (${USAGE})\n`);
    return 2;
  }
  const authorization = `Bearer ${readFileSync(values['token-file'], 'utf8').trim()}`;
  const listenTls = values['listen-tls']?.split(',');
  const upstreamTls = values['upstream-tls']?.split(',');
  if ((listenTls !== undefined && listenTls.length !== 3) || (upstreamTls !== undefined && upstreamTls.length !== 4)) {
    process.stderr.write(
      `floor-proxy: --listen-tls takes CERT,KEY,CA and --upstream-tls CA,CERT,KEY,SERVERNAME (${USAGE})\n`,
    );
    return 2;
  }
  const connect =
    upstreamTls === undefined
      ? undefined
      : {
          ca: readFileSync(upstreamTls[0]!),
          cert: readFileSync(upstreamTls[1]!),
          key: readFileSync(upstreamTls[2]!),
          servername: upstreamTls[3]!,
        };
  const pools = new Map<string, Pool>();
  for (const entry of values.upstream.split(',')) {
    const [model, address] = entry.split('=');
    if (model === undefined || address === undefined) {
      process.stderr.write(`floor-proxy: --upstream entry "${entry}" is not MODEL=HOST:PORT (${USAGE})\n`);
      return 2;
    }
    pools.set(
      model,
      new Pool(`${connect === undefined ? 'http' : 'https'}://${address}`, {
        pipelining: 1,
        keepAliveTimeout: 60_000,
        ...(connect === undefined ? {} : { connect }),
      }),
    );
  }
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      let model: unknown;
      try {
        model = (JSON.parse(body.toString('utf8')) as { model?: unknown }).model;
      } catch {
        model = undefined;
      }
      const pool = typeof model === 'string' ? pools.get(model) : undefined;
      if (pool === undefined) {
        res.writeHead(404).end();
        return;
      }
      pool
        .request({
          path: req.url ?? '/',
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization },
          body,
        })
        .then(
          (upstream) => {
            const headers: Record<string, string | string[]> = {};
            for (const name in upstream.headers) {
              const value = upstream.headers[name];
              if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
            }
            res.writeHead(upstream.statusCode, headers);
            if (headers['content-length'] === undefined) res.flushHeaders();
            upstream.body.on('data', (chunk: Buffer) => {
              if (!res.write(chunk)) {
                upstream.body.pause();
                res.once('drain', () => upstream.body.resume());
              }
            });
            upstream.body.on('end', () => res.end());
            upstream.body.on('error', () => res.destroy());
          },
          () => {
            res.writeHead(502).end();
          },
        );
    });
  };
  const server =
    listenTls === undefined
      ? createServer(handle)
      : createTlsServer(
          {
            cert: readFileSync(listenTls[0]!),
            key: readFileSync(listenTls[1]!),
            ca: readFileSync(listenTls[2]!),
            requestCert: true,
            rejectUnauthorized: true,
          },
          handle,
        );
  server.keepAliveTimeout = 75_000;
  server.listen(Number(values.port ?? 0), '127.0.0.1', () => {
    const address = server.address();
    process.stdout.write(
      `${JSON.stringify({ msg: 'listening', listener: 'floor', port: typeof address === 'object' && address !== null ? address.port : 0 })}\n`,
    );
  });
  const stop = (): void => {
    server.close();
    server.closeAllConnections();
    for (const pool of pools.values()) void pool.destroy();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  return 0;
}

process.exitCode = main();
