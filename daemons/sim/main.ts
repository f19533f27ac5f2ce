// `node daemons/sim/main.ts --name sim-a --models m1,m2 --token-file FILE [--port 0] [--latency-ms N]
// [--tokens-per-second N] [--completion-tokens N]`. The token comes from a file or an environment variable
// (--token-env, default SIM_TOKEN), never from argv, where every local user could read it.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { createLogger } from '../shared/log.ts';
import { startSim } from './server.ts';

const USAGE =
  'usage: node daemons/sim/main.ts --name NAME --models m1[,m2] (--token-file FILE | --token-env VAR) ' +
  '[--host 127.0.0.1] [--port 0] [--latency-ms 0] [--tokens-per-second 0] [--completion-tokens 16]';

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
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (values.help === true) {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    if (values.name === undefined || values.models === undefined) throw new Error('--name and --models are required');
    const token =
      values['token-file'] !== undefined
        ? readFileSync(values['token-file'], 'utf8').trim()
        : (process.env[values['token-env'] ?? 'SIM_TOKEN'] ?? '').trim();
    if (token === '') throw new Error('no bearer token: pass --token-file FILE or set SIM_TOKEN');
    const sim = await startSim({
      name: values.name,
      models: values.models.split(',').map((m) => m.trim()).filter((m) => m !== ''),
      token,
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
