// caller_auth (consumer only, first filter): who is calling. The key comes as `Authorization: Bearer KEY` or
// `x-api-key: KEY` (the OpenAI and Anthropic SDK conventions), is checked against the salted hashes of the keys
// file, and the request is attributed to the key's tenant. Both headers are removed from what goes upstream: the
// caller's key never leaves the consumer. The file is read at startup and on reload (SIGHUP); a reload that fails
// keeps the last good table (logged), and a gateway that never read a good file answers 503, not 401.
import type { CallerAuthFilter } from '../../../schemas/generated/gateway-config.ts';
import { CallerKeyTable, readCallerKeysFile } from '../caller-keys.ts';
import type { Filter, GatewayRequest } from '../context.ts';
import { unauthorized, unavailable } from '../errors.ts';
import type { Logger } from '../../shared/log.ts';

export interface CallerAuth extends Filter {
  /** Re-reads the keys file; returns the number of entries now in force (the old count when the read failed). */
  reload(): number;
}

const BEARER = /^Bearer +(\S+) *$/i;

function presentedKey(request: GatewayRequest): string | undefined | null {
  const authorization = request.req.headers['authorization'];
  const apiKey = request.req.headers['x-api-key'];
  if (typeof authorization === 'string' && authorization !== '') {
    const match = BEARER.exec(authorization);
    return match === null ? null : match[1];
  }
  if (typeof apiKey === 'string' && apiKey !== '') return apiKey.trim();
  return undefined;
}

export function createCallerAuth(config: CallerAuthFilter, configDir: string, logger: Logger): CallerAuth {
  const path = config.keys_file.startsWith('/') ? config.keys_file : `${configDir}/${config.keys_file}`;
  let table: CallerKeyTable | undefined;
  const reload = (): number => {
    try {
      table = new CallerKeyTable(readCallerKeysFile(path));
      logger.info({ keys_file: config.keys_file, entries: table.size }, 'caller keys read');
    } catch (error) {
      logger.warn({ keys_file: config.keys_file, problem: (error as Error).message }, table === undefined
        ? 'caller keys unusable; every request gets 503 until a reload reads a good file'
        : 'caller keys unusable; the previous keys stay in force');
    }
    return table?.size ?? 0;
  };
  reload();

  return {
    name: 'caller_auth',
    reload,
    apply(request: GatewayRequest): void {
      const key = presentedKey(request);
      request.headers.delete('authorization');
      request.headers.delete('x-api-key');
      if (table === undefined) throw unavailable('caller_keys_unavailable', 'the gateway has no readable caller keys file', 5);
      if (key === undefined) {
        throw unauthorized('missing_api_key', 'You didn\'t provide an API key. Send it as "Authorization: Bearer KEY" or "x-api-key: KEY".');
      }
      // Unknown, revoked and malformed answer alike, so the answer does not tell which keys exist.
      const verdict = key === null ? { ok: false as const } : table.verify(key);
      if (!verdict.ok) throw unauthorized('invalid_api_key', 'Incorrect API key provided.');
      request.tenant = verdict.tenant;
      request.callerKeyId = verdict.id;
    },
  };
}
