// The request header policy at a trust boundary (the consumer's hop to another site's provider gateway, and the
// provider gateway's call to its backend): only allowlisted client headers cross. A caller's Authorization, Cookie,
// API keys, OpenAI-Organization/-Project (which would pick what the provider's key bills) and spoofed
// x-forwarded-*/forwarded never reach the other side. The gateway's own headers are written after the policy.
import schema from '../../../schemas/gateway/gateway-config.schema.json' with { type: 'json' };

/** The schema's default for `forward_request_headers` (one list, documented where the key is). */
export const DEFAULT_FORWARD_REQUEST_HEADERS: readonly string[] = schema.$defs.ForwardRequestHeaders.default;

export type HeaderAllowlist = ReadonlySet<string>;

export function headerAllowlist(configured: readonly string[] | undefined): HeaderAllowlist {
  return new Set((configured ?? DEFAULT_FORWARD_REQUEST_HEADERS).map((name) => name.toLowerCase()));
}

/** Drops every header not in `allowed` from the headers that go upstream. */
export function applyHeaderAllowlist(headers: Map<string, string | string[]>, allowed: HeaderAllowlist): void {
  for (const name of headers.keys()) if (!allowed.has(name)) headers.delete(name);
}
