// caller_auth (consumer only, first filter): who is calling. The key comes as `Authorization: Bearer KEY` or
// `x-api-key: KEY` (the OpenAI and Anthropic SDK conventions), is checked against the salted hashes of the keys
// file, and the request is attributed to the key's tenant. Both headers are removed from what goes upstream: the
// caller's key never leaves the consumer. The file is followed on disk (gateway-files.ts): a revoked or minted key
// takes effect about 0.3 s after the file changes, SIGHUP re-reads it at once. A bad file keeps the last good table
// (logged, counted), and a gateway that never read a good file answers 503, not 401.
import type { CallerAuthFilter } from '../../../schemas/generated/gateway-config.ts';
import { CallerKeyTable, MAX_CALLER_KEYS_FILE_BYTES, parseCallerKeys } from '../../../schemas/gateway/caller-keys.ts';
import type { Filter, GatewayRequest } from '../context.ts';
import { unauthorized, unavailable } from '../errors.ts';
import type { GatewayFiles } from '../gateway-files.ts';

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

export function createCallerAuth(config: CallerAuthFilter, files: GatewayFiles): Filter {
  const path = files.resolve(config.keys_file);
  const keys = files.add({
    kind: 'caller_keys',
    name: config.keys_file,
    files: [path],
    maxBytes: MAX_CALLER_KEYS_FILE_BYTES,
    parse: ([bytes]) => new CallerKeyTable(parseCallerKeys(bytes!.toString('utf8'), path)),
    fields: (table) => ({ entries: table.size }),
  });

  return {
    name: 'caller_auth',
    apply(request: GatewayRequest): void {
      const key = presentedKey(request);
      request.headers.delete('authorization');
      request.headers.delete('x-api-key');
      const table = keys.current();
      if (table === undefined)
        throw unavailable('caller_keys_unavailable', 'the gateway has no readable caller keys file', 5);
      if (key === undefined) {
        throw unauthorized(
          'missing_api_key',
          'You didn\'t provide an API key. Send it as "Authorization: Bearer KEY" or "x-api-key: KEY".',
        );
      }
      // Unknown, revoked and malformed answer alike, so the answer does not tell which keys exist.
      const verdict = key === null ? { ok: false as const } : table.verify(key);
      if (!verdict.ok) throw unauthorized('invalid_api_key', 'Incorrect API key provided.');
      request.tenant = verdict.tenant;
      request.callerKeyId = verdict.id;
    },
  };
}
