// credential_inject on its own: sources (file, env, value), trimming, the 16 KiB bound, lookup by
// (name, namespace, key), and failing closed with 503 on any doubt, never echoing a token.
import { join } from 'node:path';
import { writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../daemons/shared/log.ts';
import { GatewayError } from '../../daemons/gateway/errors.ts';
import { createCredentialInject } from '../../daemons/gateway/filters/credential-inject.ts';
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

function run(filter: ReturnType<typeof createCredentialInject>, credential: CredentialRef | undefined): Map<string, string | string[]> {
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
  const filter = () =>
    createCredentialInject(
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
      dir,
      logger,
    );

  it('replaces the client Authorization with exactly one trimmed bearer token from each source', () => {
    const f = filter();
    expect(run(f, { name: 'from-file', namespace: 'grid-system', key: 'token' }).get('authorization')).toBe('Bearer file-token-1');
    expect(run(f, { name: 'from-env', namespace: 'grid-system', key: 'token' }).get('authorization')).toBe('Bearer env-token-2');
    expect(run(f, { name: 'from-value', namespace: 'grid-system', key: 'token' }).get('authorization')).toBe('Bearer value-token-3');
  });

  it('leaves requests without a credential reference untouched', () => {
    expect(run(filter(), undefined).get('authorization')).toBe('Bearer client');
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
  ])('fails closed with 503 for %s', (_what, ref) => {
    expect(status(() => run(filter(), ref))).toBe(503);
  });

  it('picks up a rotated file on reload', async () => {
    const f = filter();
    await writeFile(join(dir, 'ok'), 'file-token-1b');
    expect(f.reload()).toBe(3);
    expect(run(f, { name: 'from-file', namespace: 'grid-system', key: 'token' }).get('authorization')).toBe('Bearer file-token-1b');
  });
});
