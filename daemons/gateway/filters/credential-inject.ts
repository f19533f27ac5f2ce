// credential_inject (SPEC §3.2): tokens keyed by (name, namespace, key), read once at startup (and on reload)
// from a file (trimmed, at most 16 KiB), an environment variable or an inline value. The request path only looks
// the token up in memory. Any doubt fails closed with 503; the token never reaches a log, metric or error body.
import { readFileSync, statSync } from 'node:fs';
import type { CredentialInjectFilter, CredentialSource } from '../../../schemas/generated/gateway-config.ts';
import { unavailable } from '../errors.ts';
import type { CredentialRef, Filter, GatewayRequest } from '../context.ts';
import type { Logger } from '../../shared/log.ts';

export const MAX_TOKEN_FILE_BYTES = 16 * 1024;
// A token is one header value: visible ASCII only, so it cannot split the header.
const TOKEN = /^[\x21-\x7e]+$/;

interface LoadedCredential {
  readonly source: CredentialSource;
  /** `Bearer <token>`, made once per load rather than per request; undefined when the token is unusable (logged). */
  readonly authorization: string | undefined;
}

export interface CredentialInject extends Filter {
  /** Re-reads every source (file rotation); returns how many credentials are usable. */
  reload(): number;
}

function describe(source: CredentialSource): string {
  return `${source.namespace}/${source.name}/${source.key}`;
}

/** The token, or why it is unusable: the problem is logged, so it names the source and never holds token bytes. */
function loadToken(source: CredentialSource, configDir: string): { token?: string; problem?: string } {
  let raw: string | undefined;
  if (source.file !== undefined) {
    const path = source.file.startsWith('/') ? source.file : `${configDir}/${source.file}`;
    try {
      if (statSync(path).size > MAX_TOKEN_FILE_BYTES) return { problem: `file ${source.file} is larger than ${MAX_TOKEN_FILE_BYTES} bytes` };
      raw = readFileSync(path, 'utf8');
    } catch (error) {
      return { problem: `file ${source.file} is unreadable (${(error as NodeJS.ErrnoException).code ?? 'error'})` };
    }
  } else if (source.env_var !== undefined) {
    raw = process.env[source.env_var];
    if (raw === undefined) return { problem: `environment variable ${source.env_var} is not set` };
  } else {
    raw = source.value;
  }
  const token = (raw ?? '').trim();
  if (token === '') return { problem: 'the token is empty' };
  if (!TOKEN.test(token)) return { problem: 'the token contains characters not allowed in a header value' };
  return { token };
}

export function createCredentialInject(config: CredentialInjectFilter, configDir: string, logger: Logger): CredentialInject {
  let loaded: LoadedCredential[] = [];
  const reload = (): number => {
    loaded = (config.credentials ?? []).map((source) => {
      const { token, problem } = loadToken(source, configDir);
      if (problem !== undefined) logger.warn({ credential: describe(source), problem }, 'credential unusable; requests that need it get 503');
      return { source, authorization: token === undefined ? undefined : `Bearer ${token}` };
    });
    return loaded.filter((c) => c.authorization !== undefined).length;
  };
  reload();

  // Entries are unique by (name, namespace, key) (the config loader refuses a repeat): an exact match or nothing.
  function find(ref: CredentialRef): LoadedCredential | undefined {
    return loaded.find((entry) => entry.source.name === ref.name && entry.source.namespace === ref.namespace && entry.source.key === ref.key);
  }

  return {
    name: 'credential_inject',
    reload,
    apply(request: GatewayRequest): void {
      const ref = request.credential;
      if (ref === undefined) return;
      if (ref.strategy !== undefined && ref.strategy !== 'bearer_token') {
        throw unavailable('credential_unavailable', `credential strategy "${ref.strategy}" is not supported`);
      }
      if (ref.name === undefined || ref.name === '') throw unavailable('credential_unavailable', 'the route names an incomplete credential reference');
      const entry = find(ref);
      if (entry === undefined) throw unavailable('credential_unavailable', `credential "${ref.name}" is not configured on this gateway`);
      if (entry.authorization === undefined) throw unavailable('credential_unavailable', `credential "${ref.name}" is not available on this gateway`);
      request.headers.delete('authorization');
      request.headers.set('authorization', entry.authorization);
    },
  };
}
