// credential_inject (docs/contract.md §3.2): tokens keyed by (name, namespace, key), from a file (trimmed, at most
// 16 KiB), an environment variable or an inline value. A file is followed on disk (gateway-files.ts): a rotated
// Secret is injected within a second of the kubelet's swap, and a bad replacement (empty, unreadable, not a header
// value) keeps the previous token. The request path only looks the token up in memory. Any doubt fails closed with
// 503; the token never reaches a log, metric or error body.
import type { CredentialInjectFilter, CredentialSource } from '../../../schemas/generated/gateway-config.ts';
import { unavailable } from '../errors.ts';
import type { CredentialRef, Filter, GatewayRequest } from '../context.ts';
import type { GatewayFiles } from '../gateway-files.ts';
import type { Logger } from '../../shared/log.ts';
import { MountedFileError } from '../../shared/mounted-files.ts';

export const MAX_TOKEN_FILE_BYTES = 16 * 1024;
// A token is one header value: visible ASCII only, so it cannot split the header.
const TOKEN = /^[\x21-\x7e]+$/;

interface LoadedCredential {
  readonly source: CredentialSource;
  /** `Bearer <token>`, made once per load rather than per request; undefined while the token is unusable (logged). */
  authorization(): string | undefined;
}

function describe(source: CredentialSource): string {
  return `${source.namespace}/${source.name}/${source.key}`;
}

/** The token of a source's text, or why it is unusable: the problem names no token bytes. */
function tokenProblem(raw: string): { token?: string; problem?: string } {
  const token = raw.trim();
  if (token === '') return { problem: 'the token is empty' };
  if (!TOKEN.test(token)) return { problem: 'the token contains characters not allowed in a header value' };
  return { token };
}

/** An environment or inline token: read once, as the process's environment does not change. */
function staticToken(source: CredentialSource, logger: Logger): string | undefined {
  let raw: string | undefined;
  if (source.env_var !== undefined) {
    raw = process.env[source.env_var];
    if (raw === undefined) {
      logger.warn(
        { credential: describe(source), problem: `environment variable ${source.env_var} is not set` },
        'credential unusable; requests that need it get 503',
      );
      return undefined;
    }
  } else {
    raw = source.value ?? '';
  }
  const { token, problem } = tokenProblem(raw);
  if (problem !== undefined)
    logger.warn({ credential: describe(source), problem }, 'credential unusable; requests that need it get 503');
  return token === undefined ? undefined : `Bearer ${token}`;
}

export function createCredentialInject(config: CredentialInjectFilter, files: GatewayFiles, logger: Logger): Filter {
  const loaded: LoadedCredential[] = (config.credentials ?? []).map((source) => {
    if (source.file === undefined) {
      const authorization = staticToken(source, logger);
      return { source, authorization: () => authorization };
    }
    const path = files.resolve(source.file);
    const set = files.add({
      kind: 'credential',
      name: describe(source),
      files: [path],
      maxBytes: MAX_TOKEN_FILE_BYTES,
      parse: ([bytes]) => {
        const { token, problem } = tokenProblem(bytes!.toString('utf8'));
        if (token === undefined) throw new MountedFileError(`${path}: ${problem ?? 'unusable'}`);
        return `Bearer ${token}`;
      },
    });
    return { source, authorization: () => set.current() };
  });

  // Entries are unique by (name, namespace, key) (the config loader refuses a repeat): an exact match or nothing.
  function find(ref: CredentialRef): LoadedCredential | undefined {
    return loaded.find(
      (entry) =>
        entry.source.name === ref.name && entry.source.namespace === ref.namespace && entry.source.key === ref.key,
    );
  }

  return {
    name: 'credential_inject',
    apply(request: GatewayRequest): void {
      const ref = request.credential;
      if (ref === undefined) return;
      if (ref.strategy !== undefined && ref.strategy !== 'bearer_token') {
        throw unavailable('credential_unavailable', `credential strategy "${ref.strategy}" is not supported`);
      }
      if (ref.name === undefined || ref.name === '')
        throw unavailable('credential_unavailable', 'the route names an incomplete credential reference');
      const entry = find(ref);
      if (entry === undefined)
        throw unavailable('credential_unavailable', `credential "${ref.name}" is not configured on this gateway`);
      const authorization = entry.authorization();
      if (authorization === undefined)
        throw unavailable('credential_unavailable', `credential "${ref.name}" is not available on this gateway`);
      request.headers.delete('authorization');
      request.headers.set('authorization', authorization);
    },
  };
}
