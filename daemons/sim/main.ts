// `node daemons/sim/main.ts --name sim-a --models m1,m2 --token-file FILE [engine and answer flags]` (--help lists them).
// The token comes from a file or an environment variable (--token-env, default SIM_TOKEN), never from argv, where every
// local user could read it. The file is followed on disk (a rotated Secret needs no restart); the token it replaces is
// accepted for --token-grace-ms more.
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Counter, Registry } from 'prom-client';
import { createLogger } from '../shared/log.ts';
import { MountedFileError, MountedFiles } from '../shared/mounted-files.ts';
import { BearerTokens, DEFAULT_TOKEN_GRACE_MS } from './bearer-tokens.ts';
import { DEFAULT_ENGINE_CONFIG, resolveEngineConfig } from './engine/config.ts';
import type { EngineConfig } from './engine/config.ts';
import { startSim } from './server.ts';

const USAGE =
  'usage: node daemons/sim/main.ts --name NAME --models m1[,m2] (--token-file FILE | --token-env VAR) [--host 127.0.0.1] [--port 0] ' +
  '[--latency-ms 0] [--tokens-per-second 0] [--completion-tokens 16] [--completion-tokens-spread 0] [--seed 0] [--max-num-seqs N] ' +
  '[--max-num-batched-tokens N] [--block-size N] [--num-gpu-blocks N] [--max-model-len N] [--no-enable-prefix-caching] ' +
  `[--step-overhead-ms MS] [--prefill-ms-per-token MS] [--decode-ms-per-seq MS] [--token-grace-ms ${DEFAULT_TOKEN_GRACE_MS}]`;
const d = DEFAULT_ENGINE_CONFIG;
const HELP = `${USAGE}

An OpenAI-compatible backend whose answers come from a model of a vLLM engine: requests queue, batch, reuse the prefix
cache and stream at the pace of its steps; /metrics reports its state under vLLM's metric names. The defaults model
Llama-3.1-8B-Instruct on one H100 80GB (daemons/sim/README.md gives their sources).

  --name NAME                   names the sim on every answer (x-sim-provider)
  --models m1[,m2]              the models it serves (the first labels its metrics)
  --token-file FILE             the bearer token, followed on disk; or --token-env VAR (default SIM_TOKEN)
  --token-grace-ms MS           the replaced token stays accepted this long after a rotation (${DEFAULT_TOKEN_GRACE_MS})
  --host, --port                where it listens (127.0.0.1, 0 = any free port)
  --latency-ms MS               front-end delay before a request reaches the engine (0)
  --tokens-per-second N         caps each sequence's decode speed: no step shorter than 1000/N ms (0 = the engine's pace)
  --completion-tokens N         output tokens of a request without max_tokens (16)
  --completion-tokens-spread S  draw them uniformly in [N(1-S), N(1+S)] from --seed (${d.completionTokensSpread}: exactly N)
  --seed N                      seed of that draw (${d.seed})
  --max-num-seqs N              running batch at most; more requests wait (${d.maxNumSeqs})
  --max-num-batched-tokens N    tokens one step schedules at most, prefill chunks and decodes (${d.maxNumBatchedTokens})
  --block-size N                tokens per KV-cache block (${d.blockSize})
  --num-gpu-blocks N            KV-cache blocks in all (${d.numGpuBlocks})
  --max-model-len N             prompt plus output tokens at most; longer requests get a 400 (${d.maxModelLen})
  --no-enable-prefix-caching    turn prefix caching off (on by default)
  --step-overhead-ms MS         fixed cost of every engine step (${d.stepOverheadMs})
  --prefill-ms-per-token MS     cost of each prompt token a step computes; cached ones are free (${d.prefillMsPerToken})
  --decode-ms-per-seq MS        cost of each sequence a step decodes (${d.decodeMsPerSeq})
  -h, --help                    this text
`;
const MAX_TOKEN_FILE_BYTES = 16 * 1024;
// One header value: visible ASCII only.
const TOKEN = /^[\x21-\x7e]+$/;

function number(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < 0)
    throw new Error(`--${name} must be a non-negative number, got "${value}"`);
  return n;
}

function positiveInteger(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^[0-9]+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1)
    throw new Error(`--${name} must be a positive integer, got "${value}"`);
  return n;
}

/** The engine flags given, checked one by one here and together by the engine's own validation. */
function engineFlags(values: Record<string, string | boolean | undefined>): Partial<EngineConfig> {
  const str = (name: string): string | undefined => values[name] as string | undefined;
  const config: Record<string, number | boolean | undefined> = {
    maxNumSeqs: positiveInteger(str('max-num-seqs'), 'max-num-seqs'),
    maxNumBatchedTokens: positiveInteger(str('max-num-batched-tokens'), 'max-num-batched-tokens'),
    blockSize: positiveInteger(str('block-size'), 'block-size'),
    numGpuBlocks: positiveInteger(str('num-gpu-blocks'), 'num-gpu-blocks'),
    maxModelLen: positiveInteger(str('max-model-len'), 'max-model-len'),
    completionTokensSpread:
      str('completion-tokens-spread') === undefined
        ? undefined
        : number(str('completion-tokens-spread'), 'completion-tokens-spread', 0),
    seed: str('seed') === undefined ? undefined : number(str('seed'), 'seed', 0),
    stepOverheadMs:
      str('step-overhead-ms') === undefined ? undefined : number(str('step-overhead-ms'), 'step-overhead-ms', 0),
    prefillMsPerToken:
      str('prefill-ms-per-token') === undefined
        ? undefined
        : number(str('prefill-ms-per-token'), 'prefill-ms-per-token', 0),
    decodeMsPerSeq:
      str('decode-ms-per-seq') === undefined ? undefined : number(str('decode-ms-per-seq'), 'decode-ms-per-seq', 0),
    enablePrefixCaching: values['no-enable-prefix-caching'] === true ? false : undefined,
  };
  const given = Object.fromEntries(Object.entries(config).filter(([, v]) => v !== undefined)) as Partial<EngineConfig>;
  try {
    resolveEngineConfig(given);
  } catch (error) {
    // The engine names parameters as vLLM does (max_num_seqs); the flags are the same names with dashes.
    throw new Error(
      (error as Error).message.replace(/\b[a-z]+(?:_[a-z]+)+\b/g, (name) => `--${name.replaceAll('_', '-')}`),
    );
  }
  return given;
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
        'completion-tokens-spread': { type: 'string' },
        seed: { type: 'string' },
        'max-num-seqs': { type: 'string' },
        'max-num-batched-tokens': { type: 'string' },
        'block-size': { type: 'string' },
        'num-gpu-blocks': { type: 'string' },
        'max-model-len': { type: 'string' },
        'no-enable-prefix-caching': { type: 'boolean' },
        'step-overhead-ms': { type: 'string' },
        'prefill-ms-per-token': { type: 'string' },
        'decode-ms-per-seq': { type: 'string' },
        'token-grace-ms': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (values.help === true) {
      process.stdout.write(HELP);
      return 0;
    }
    if (values.name === undefined || values.models === undefined) throw new Error('--name and --models are required');
    const engine = engineFlags(values);
    const completionTokens =
      values['completion-tokens'] === undefined
        ? 16
        : positiveInteger(values['completion-tokens'], 'completion-tokens')!;
    const graceMs = number(values['token-grace-ms'], 'token-grace-ms', DEFAULT_TOKEN_GRACE_MS);
    const registry = new Registry();
    let tokens: BearerTokens;
    let tokenFile: MountedFiles<string> | undefined;
    if (values['token-file'] !== undefined) {
      const path = resolve(values['token-file']);
      const reloads = new Counter({
        name: 'sim_token_reloads_total',
        help: 'Reads of --token-file that took a new token (accepted) or kept the previous one (rejected).',
        labelNames: ['outcome'],
        registers: [registry],
      });
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
          if (!TOKEN.test(token))
            throw new MountedFileError(
              `--token-file ${path}: the token contains characters not allowed in a header value`,
            );
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
      models: values.models
        .split(',')
        .map((m) => m.trim())
        .filter((m) => m !== ''),
      token: tokens,
      host: values.host ?? '127.0.0.1',
      port: number(values.port, 'port', 0),
      latencyMs: number(values['latency-ms'], 'latency-ms', 0),
      tokensPerSecond: number(values['tokens-per-second'], 'tokens-per-second', 0),
      completionTokens,
      engine,
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
    process.stderr.write(`sim: ${(error as Error).message.replace(/\s*\n\s*/g, ' ')} (${USAGE})\n`);
    return 2;
  }
}

main().then((code) => {
  process.exitCode = code;
});
