/**
 * Who may open the fleet dashboard when it is served with a token: a request carries `Authorization: Bearer <token>`,
 * or the session cookie a browser gets by opening `/dashboard/?token=<token>` once. The cookie holds an HMAC keyed
 * with the token, never the token, so it stops working when the token is rotated and cannot be turned back into it.
 * Every comparison is constant-time over SHA-256 digests (equal lengths whatever was sent). Pure: the token comes in
 * already loaded (dashboard-token-file.ts), nothing here reads a file or logs.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

export const SESSION_COOKIE = 'agn_dashboard_session';
const SESSION_CONTEXT = 'agn fleet dashboard session v1';
/** The token's bounds: long enough not to be guessed, short enough for a header and a URL. */
export const MIN_TOKEN_BYTES = 16;
export const MAX_TOKEN_BYTES = 4096;

/** A loaded token with what requests are compared against (the token bytes stay inside). */
export interface DashboardToken {
  readonly digest: Buffer;
  /** The cookie value a browser holds. */
  readonly session: string;
  readonly sessionDigest: Buffer;
}

const sha256 = (value: string | Buffer): Buffer => createHash('sha256').update(value).digest();

/** Why `text` cannot be the token, or undefined when it can; the problem never quotes it. */
export function tokenProblem(text: string): string | undefined {
  const bytes = Buffer.byteLength(text);
  if (bytes < MIN_TOKEN_BYTES)
    return `the token is ${bytes} bytes, at least ${MIN_TOKEN_BYTES} are needed (e.g. openssl rand -base64 32)`;
  if (bytes > MAX_TOKEN_BYTES) return `the token is longer than ${MAX_TOKEN_BYTES} bytes`;
  // Visible ASCII only: it travels in an Authorization header and a URL.
  if (!/^[\x21-\x7e]+$/.test(text))
    return 'the token holds whitespace, control or non-ASCII characters; use visible ASCII only';
  return undefined;
}

/** The file's text as a token: surrounding whitespace (a trailing newline) is not part of it. */
export function dashboardToken(text: string): DashboardToken {
  const token = text.trim();
  const session = createHmac('sha256', token).update(SESSION_CONTEXT).digest('base64url');
  return { digest: sha256(token), session, sessionDigest: sha256(session) };
}

const matches = (candidate: string, digest: Buffer): boolean => timingSafeEqual(sha256(candidate), digest);

function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** The raw value of `token` in a query string, percent-decoded ('+' stays '+': base64 tokens carry it). */
function queryToken(search: string): { present: boolean; value: string | undefined } {
  for (const pair of search.replace(/^\?/, '').split('&')) {
    const eq = pair.indexOf('=');
    const key = eq < 0 ? pair : pair.slice(0, eq);
    if (key !== 'token') continue;
    try {
      return { present: true, value: decodeURIComponent(eq < 0 ? '' : pair.slice(eq + 1)) };
    } catch {
      return { present: true, value: undefined };
    }
  }
  return { present: false, value: undefined };
}

/** The query string without its `token` parameter ('' when nothing else is left). */
function withoutToken(search: string): string {
  const rest = search
    .replace(/^\?/, '')
    .split('&')
    .filter((pair) => pair !== '' && pair !== 'token' && !pair.startsWith('token='));
  return rest.length === 0 ? '' : `?${rest.join('&')}`;
}

export type AccessDecision =
  | { readonly kind: 'allow' }
  /** A correct ?token=: redirect to `location` (the URL without it) setting `cookie`. */
  | { readonly kind: 'login'; readonly location: string; readonly cookie: string }
  | { readonly kind: 'deny' }
  /** No token is loaded (its file is missing or invalid): nobody gets in. */
  | { readonly kind: 'unavailable' };

/** Decides one request to `path` (already a dashboard path) with query `search`. */
export function decideAccess(
  req: Pick<IncomingMessage, 'headers'>,
  path: string,
  search: string,
  token: DashboardToken | undefined,
): AccessDecision {
  if (token === undefined) return { kind: 'unavailable' };
  const query = queryToken(search);
  if (query.present) {
    if (query.value === undefined || !matches(query.value, token.digest)) return { kind: 'deny' };
    const page = path === '/dashboard' ? '/dashboard/' : path;
    return {
      kind: 'login',
      location: `${page}${withoutToken(search)}`,
      cookie: `${SESSION_COOKIE}=${token.session}; Path=/dashboard; HttpOnly; SameSite=Strict`,
    };
  }
  const authorization = req.headers.authorization;
  if (authorization !== undefined) {
    const bearer = /^Bearer (\S+)$/i.exec(authorization.trim());
    return bearer !== null && matches(bearer[1]!, token.digest) ? { kind: 'allow' } : { kind: 'deny' };
  }
  const cookie = cookieValue(req.headers.cookie, SESSION_COOKIE);
  return cookie !== undefined && matches(cookie, token.sessionDigest) ? { kind: 'allow' } : { kind: 'deny' };
}

/** The 401 page: what the dashboard needs and where the token is (never the token). Plain HTML, no script or style. */
export const DENIED_PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Fleet dashboard: token needed</title></head>
<body>
<main>
<h1>This fleet dashboard needs its token</h1>
<p>Open <code>/dashboard/?token=TOKEN</code> once in this browser: the address bar loses the token and the browser keeps a
session cookie for this page, until the token changes. Scripts send <code>Authorization: Bearer TOKEN</code> instead.</p>
<p>The token is the file the operator reads (<code>--dashboard-token-file</code>). In a cluster it is the Secret the site
declares, by default <code>grid-dashboard-token</code> (key <code>token</code>) in the site namespace:</p>
<pre>kubectl -n grid-system get secret grid-dashboard-token -o jsonpath='{.data.token}' | base64 -d</pre>
<p>With <code>agn up</code>, open the dashboard address it prints, which carries the token.</p>
</main>
</body>
</html>
`;

export const UNAVAILABLE_TEXT =
  'the dashboard token is not loaded (its file is missing or invalid; see the operator log), so nobody can open the dashboard\n';
