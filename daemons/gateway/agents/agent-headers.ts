// The headers agent protocols need on every hop, kept whatever forward_request_headers says: without them a session
// cannot continue (Mcp-Session-Id), a revision cannot be told (MCP-Protocol-Version, A2A-Version), a resumed stream
// restarts from the beginning (Last-Event-ID), and the server cannot choose between JSON and SSE (Accept).
import { headerAllowlist, type HeaderAllowlist } from '../filters/header-policy.ts';

export const MCP_HEADERS = [
  'accept',
  'content-type',
  'mcp-session-id',
  'mcp-protocol-version',
  'last-event-id',
] as const;
export const A2A_HEADERS = [
  'accept',
  'content-type',
  'last-event-id',
  'a2a-version',
  'a2a-extensions',
  'x-a2a-extensions',
] as const;

export function agentAllowlist(
  configured: readonly string[] | undefined,
  protocol: readonly string[],
): HeaderAllowlist {
  return new Set([...headerAllowlist(configured), ...protocol]);
}

/** The path segment after `prefix` naming a server or agent, and what follows it ('' or '/...'); undefined if none. */
export function namedPath(path: string, prefix: string): { name: string; rest: string } | undefined {
  if (!path.startsWith(prefix)) return undefined;
  const tail = path.slice(prefix.length);
  const slash = tail.indexOf('/');
  const name = slash === -1 ? tail : tail.slice(0, slash);
  if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(name)) return undefined;
  // `<prefix><name>/` is the same resource: an A2A client resolves the card relative to the URL it is given, so
  // it is given the URL with the slash.
  const rest = slash === -1 ? '' : tail.slice(slash);
  return { name, rest: rest === '/' ? '' : rest };
}

export function queryOf(target: string): string {
  const q = target.indexOf('?');
  return q === -1 ? '' : target.slice(q);
}
