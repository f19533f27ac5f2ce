// `node daemons/sim/main.ts --name sim-a --models m1,m2 --token-file FILE [--port 0] [--latency-ms N]
// [--tokens-per-second N] [--completion-tokens N] [--token-grace-ms N]`. The token comes from a file or an environment
// variable (--token-env, default SIM_TOKEN), never from argv, where every local user could read it. The file is
// followed on disk (a rotated Secret needs no restart); the token it replaces is accepted for --token-grace-ms more.
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Counter, Registry } from 'prom-client';
import { createLogger } from '../shared/log.ts';
import { MountedFileError, MountedFiles } from '../shared/mounted-files.ts';
import { BearerTokens, DEFAULT_TOKEN_GRACE_MS } from './bearer-tokens.ts';
import { startSim } from './server.ts';

const USAGE =
  'usage: node daemons/sim/main.ts --name NAME --models m1[,m2] (--token-file FILE | --token-env VAR) ' +
  `[--host 127.0.0.1] [--port 0] [--latency-ms 0] [--tokens-per-second 0] [--completion-tokens 16] [--token-grace-ms ${DEFAULT_TOKEN_GRACE_MS}]`;
const MAX_TOKEN_FILE_BYTES = 16 * 1024;
// One header value: visible ASCII only.
const TOKEN = /^[\x21-\x7e]+$/;

function number(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a non-negative number, got "${value}"`);
  return n;
}

async function main(): Promise<number> {
  const logger = createLogger({ name: 'sim' });
  try {
    const { values } = parseArgs({
      strict: true,
      options: {
        name: { type: 'string' },
        models: { type: 'string' },
        'token-file': { type: 'string' },
        'token-env': { type: 'string' },
        host: { type: 'string' },
        port: { type: 'string' },
        'latency-ms': { type: 'string' },
        'tokens-per-second': { type: 'string' },
        'completion-tokens': { type: 'string' },
        'token-grace-ms': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (values.help === true) {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    if (values.name === undefined || values.models === undefined) throw new Error('--name and --models are required');
    const graceMs = number(values['token-grace-ms'], 'token-grace-ms', DEFAULT_TOKEN_GRACE_MS);
    const registry = new Registry();
    let tokens: BearerTokens;
    let tokenFile: MountedFiles<string> | undefined;
    if (values['token-file'] !== undefined) {
      const path = resolve(values['token-file']);
      const reloads = new Counter({ name: 'sim_token_reloads_total', help: 'Reads of --token-file that took a new token (accepted) or kept the previous one (rejected).', labelNames: ['outcome'], registers: [registry] });
      let current: BearerTokens | undefined;
      tokenFile = new MountedFiles<string>({
        kind: 'token',
        name: path,
        files: [path],
        labels: [`--token-file ${path}`],
        maxBytes: MAX_TOKEN_FILE_BYTES,
        parse: ([bytes]) => {
          const token = bytes!.toString('utf8').trim();
          if (token === '') throw new MountedFileError(`--token-file ${path}: the token is empty`);
          if (!TOKEN.test(token)) throw new MountedFileError(`--token-file ${path}: the token contains characters not allowed in a header value`);
          return token;
        },
        use: (next) => void current?.rotate(next),
        logger,
        count: (outcome) => reloads.inc({ outcome }),
      });
      const first = await tokenFile.start();
      const token = tokenFile.current();
      if (first.outcome === 'rejected' || token === undefined) {
        tokenFile.close();
        throw new Error(first.outcome === 'rejected' ? first.problem : `--token-file ${path}: not read`);
      }
      current = tokens = new BearerTokens(token, { graceMs });
    } else {
      const token = (process.env[values['token-env'] ?? 'SIM_TOKEN'] ?? '').trim();
      if (token === '') throw new Error('no bearer token: pass --token-file FILE or set SIM_TOKEN');
      tokens = new BearerTokens(token, { graceMs });
    }
    const sim = await startSim({
      name: values.name,
      registry,
      models: values.models.split(',').map((m) => m.trim()).filter((m) => m !== ''),
      token: tokens,
      host: values.host ?? '127.0.0.1',
      port: number(values.port, 'port', 0),
      latencyMs: number(values['latency-ms'], 'latency-ms', 0),
      tokensPerSecond: number(values['tokens-per-second'], 'tokens-per-second', 0),
      completionTokens: number(values['completion-tokens'], 'completion-tokens', 16),
    });
    logger.info({ port: sim.port, name: values.name }, 'listening');
    await new Promise<void>((resolve) => {
      process.once('SIGTERM', resolve);
      process.once('SIGINT', resolve);
    });
    tokenFile?.close();
    await sim.close();
    return 0;
  } catch (error) {
    // One line: what was wrong, then the usage (a usage error is one line on stderr).
    process.stderr.write(`sim: ${(error as Error).message} (${USAGE})\n`);
    return 2;
  }
}

main().then((code) => {
  process.exitCode = code;
});
