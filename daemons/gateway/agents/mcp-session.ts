// Mcp-Session-Id as it crosses the grid. A stateful MCP server keeps a session in the one process that created it,
// so every later request of the session must reach that process, whichever consumer replica and provider gateway
// replica it passes through. Rather than a table per replica (lost on restart, different in each), the route is
// carried in the id itself, the way a cookie carries a sticky backend:
//   consumer gateway  agn1.<site, base64url>.<provider's id>   the site whose provider gateway holds the session
//   provider gateway  r<replica>.<server's id>                 the backend endpoint (index in its cluster)
// Each gateway unwraps its own layer on the way in and adds it on the way out. Nothing in it is secret: the server's
// id is the caller's already, and the site and replica index are routing facts.

/** MCP requires a session id of visible ASCII (0x21-0x7E). */
const VISIBLE_ASCII = /^[\x21-\x7e]+$/;
export const MAX_SESSION_ID_BYTES = 1024;
const CONSUMER_PREFIX = 'agn1.';

export const MCP_SESSION_HEADER = 'mcp-session-id';

export function isSessionId(value: string): boolean {
  return value.length <= MAX_SESSION_ID_BYTES && VISIBLE_ASCII.test(value);
}

export function wrapSiteSession(site: string, inner: string): string {
  return `${CONSUMER_PREFIX}${Buffer.from(site, 'utf8').toString('base64url')}.${inner}`;
}

/** The site and the provider's id of a consumer-issued session id; undefined when it is not one. */
export function unwrapSiteSession(value: string): { site: string; inner: string } | undefined {
  if (!isSessionId(value) || !value.startsWith(CONSUMER_PREFIX)) return undefined;
  const dot = value.indexOf('.', CONSUMER_PREFIX.length);
  if (dot <= CONSUMER_PREFIX.length || dot === value.length - 1) return undefined;
  const encoded = value.slice(CONSUMER_PREFIX.length, dot);
  if (!/^[A-Za-z0-9_-]+$/.test(encoded)) return undefined;
  const site = Buffer.from(encoded, 'base64url').toString('utf8');
  if (site.length === 0 || Buffer.from(site, 'utf8').toString('base64url') !== encoded) return undefined;
  return { site, inner: value.slice(dot + 1) };
}

export function wrapReplicaSession(replica: number, inner: string): string {
  return `r${replica}.${inner}`;
}

/** The backend replica and the server's own id of a provider-issued session id; undefined when it is not one. */
export function unwrapReplicaSession(value: string): { replica: number; inner: string } | undefined {
  const match = /^r(\d{1,2})\.([\x21-\x7e]+)$/.exec(value);
  if (match === null || value.length > MAX_SESSION_ID_BYTES) return undefined;
  return { replica: Number(match[1]), inner: match[2]! };
}
