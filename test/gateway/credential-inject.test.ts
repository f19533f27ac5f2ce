// credential_inject on its own: sources (file, env, value), trimming, the 16 KiB bound, lookup by
// (name, namespace, key), failing closed with 503 on any doubt, never echoing a token, and a rotated file taken on
// reload while a bad one keeps the token in force (provider-reload.test.ts follows the file on disk in a process).
import { join } from 'node:path';
import { writeFile } from 'node:fs/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../daemons/shared/log.ts';
import { GatewayError } from '../../daemons/gateway/errors.ts';
import { createCredentialInject } from '../../daemons/gateway/filters/credential-inject.ts';
import { GatewayFiles } from '../../daemons/gateway/gateway-files.ts';
import { createGatewayMetrics } from '../../daemons/gateway/metrics.ts';
import type { Filter } from '../../daemons/gateway/context.ts';
import type { CredentialRef, GatewayRequest } from '../../daemons/gateway/context.ts';
import { tempDir } from './helpers.ts';

let dir: string;
let cleanup: () => Promise<void>;
const logs: string[] = [];
const logger = createLogger({ name: 'test', level: 'debug', destination: { write: (l: string) => void logs.push(l) } });

beforeAll(async () => {
  ({ dir, cleanup } = await tempDir('cred'));
  await writeFile(join(dir, 'ok'), '\n  file-token-1  \n');
  await writeFile(join(dir, 'huge'), 'x'.repeat(16 * 1024 + 1));
  await writeFile(join(dir, 'injected'), 'abc\r\nx-evil: 1');
  process.env['AGN_TEST_TOKEN'] = ' env-token-2\n';
});

afterAll(async () => {
  delete process.env['AGN_TEST_TOKEN'];
  expect(logs.join('')).not.toMatch(/file-token-1|env-token-2|value-token-3/);
  await cleanup();
});

function run(filter: Filter, credential: CredentialRef | undefined): Map<string, string | string[]> {
  const headers = new Map<string, string | string[]>([['authorization', 'Bearer client']]);
  filter.apply({ headers, credential } as unknown as GatewayRequest);
  return headers;
}

const status = (fn: () => unknown): number => {
  try {
    fn();
  } catch (error) {
    if (error instanceof GatewayError) {
      expect(error.message).not.toMatch(/token-\d/);
      return error.status;
    }
    throw error;
  }
  return 200;
};

describe('credential_inject', () => {
  const opened: GatewayFiles[] = [];
  afterEach(() => {
    for (const files of opened.splice(0)) files.close();
  });

  /** The filter over its sources, with its files read (as the gateway reads them before it listens). */
  const filter = async (): Promise<{ f: Filter; files: GatewayFiles }> => {
    const files = new GatewayFiles({
      configDir: dir,
      logger,
      metrics: createGatewayMetrics('provider', { process: false, eventLoop: false }),
      pollIntervalMs: 0,
    });
    opened.push(files);
    const f = createCredentialInject(
      {
        filter: 'credential_inject',
        credentials: [
          { name: 'from-file', namespace: 'grid-system', key: 'token', file: join(dir, 'ok') },
          { name: 'from-env', namespace: 'grid-system', key: 'token', env_var: 'AGN_TEST_TOKEN' },
          { name: 'from-value', namespace: 'grid-system', key: 'token', value: 'value-token-3' },
          { name: 'huge', namespace: 'grid-system', key: 'token', file: join(dir, 'huge') },
          { name: 'missing', namespace: 'grid-system', key: 'token', file: join(dir, 'nope') },
          { name: 'injected', namespace: 'grid-system', key: 'token', file: join(dir, 'injected') },
          { name: 'unset', namespace: 'grid-system', key: 'token', env_var: 'AGN_TEST_UNSET_VARIABLE' },
        ],
      },
      files,
      logger,
    );
    await files.start();
    return { f, files };
  };
  const fromFile = { name: 'from-file', namespace: 'grid-system', key: 'token' };

  it('replaces the client Authorization with exactly one trimmed bearer token from each source', async () => {
    const { f } = await filter();
    expect(run(f, fromFile).get('authorization')).toBe('Bearer file-token-1');
    expect(run(f, { name: 'from-env', namespace: 'grid-system', key: 'token' }).get('authorization')).toBe(
      'Bearer env-token-2',
    );
    expect(run(f, { name: 'from-value', namespace: 'grid-system', key: 'token' }).get('authorization')).toBe(
      'Bearer value-token-3',
    );
  });

  it('leaves requests without a credential reference untouched', async () => {
    expect(run((await filter()).f, undefined).get('authorization')).toBe('Bearer client');
  });

  it.each([
    ['an unknown name', { name: 'nobody', namespace: 'grid-system', key: 'token' }],
    ['a namespace the entry does not have', { name: 'from-env', namespace: 'other', key: 'token' }],
    ['a partial reference (no name)', { key: 'token' }],
    ['another strategy', { name: 'from-value', namespace: 'grid-system', key: 'token', strategy: 'basic' }],
    ['a file over 16 KiB', { name: 'huge', namespace: 'grid-system', key: 'token' }],
    ['a missing file', { name: 'missing', namespace: 'grid-system', key: 'token' }],
    ['a token with CR/LF', { name: 'injected', namespace: 'grid-system', key: 'token' }],
    ['an unset environment variable', { name: 'unset', namespace: 'grid-system', key: 'token' }],
  ])('fails closed with 503 for %s', async (_what, ref) => {
    const { f } = await filter();
    expect(status(() => run(f, ref))).toBe(503);
  });

  it('names each unusable source and its problem in the log, never the bytes', async () => {
    logs.length = 0;
    await filter();
    const problems = logs
      .map((l) => JSON.parse(l) as { credential?: string; name?: string; problem?: string })
      .filter((l) => l.problem !== undefined);
    expect(problems.map((l) => l.problem).sort()).toEqual([
      `${join(dir, 'huge')}: larger than 16384 bytes`,
      `${join(dir, 'injected')}: the token contains characters not allowed in a header value`,
      `${join(dir, 'nope')}: cannot be read (no such file)`,
      'environment variable AGN_TEST_UNSET_VARIABLE is not set',
    ]);
    expect(logs.join('')).not.toContain('x-evil');
  });

  it('takes a rotated file on reload and keeps the token in force when the file turns empty', async () => {
    const { f, files } = await filter();
    await writeFile(join(dir, 'ok'), 'file-token-1b');
    await files.reload();
    expect(run(f, fromFile).get('authorization')).toBe('Bearer file-token-1b');
    await writeFile(join(dir, 'ok'), '\n');
    await files.reload();
    expect(run(f, fromFile).get('authorization')).toBe('Bearer file-token-1b');
    await writeFile(join(dir, 'ok'), '\n  file-token-1  \n');
  });
});
