/**
 * The fleet dashboard on the admin listener: the page and its assets (daemons/shared/dashboard/, plain files
 * versioned with the daemons, no framework, nothing fetched from elsewhere), the read model as JSON, and a
 * server-sent event stream that pushes the read model whenever it changes, so the page updates without reloads.
 * Served open or behind a token (dashboard-access.ts); a dashboard that is off is not routed at all.
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { decideAccess, DENIED_PAGE, type DashboardToken, UNAVAILABLE_TEXT } from './dashboard-access.ts';

const DASHBOARD_PATH = '/dashboard/';
/** How often an open event stream rebuilds the view (builds are shared, see the operator's DashboardSource). */
export const EVENT_INTERVAL_MS = 1_000;
/** Open event streams at most: each holds a socket; past it a page falls back to polling model.json. */
export const MAX_EVENT_STREAMS = 16;
const HEARTBEAT_MS = 15_000;

const ASSETS: Readonly<Record<string, { file: string; type: string }>> = {
  '': { file: 'index.html', type: 'text/html; charset=utf-8' },
  'dashboard.js': { file: 'dashboard.js', type: 'text/javascript; charset=utf-8' },
  'dashboard.css': { file: 'dashboard.css', type: 'text/css; charset=utf-8' },
};

// Same-origin only: the page loads nothing from anywhere else and cannot be framed.
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

function loadAssets(): Map<string, { body: Buffer; type: string }> {
  const out = new Map<string, { body: Buffer; type: string }>();
  for (const [name, asset] of Object.entries(ASSETS)) {
    out.set(name, { body: readFileSync(new URL(`./dashboard/${asset.file}`, import.meta.url)), type: asset.type });
  }
  return out;
}

/** Drops the build time so an unchanged fleet sends no event. */
function fingerprint(view: unknown): string {
  return JSON.stringify(view, (key, value: unknown) => (key === 'generatedAt' ? undefined : value));
}

/** `open`: anyone who reaches the port; `token`: a bearer token or the session cookie (the token read from memory). */
export type DashboardAccess =
  | { readonly mode: 'open' }
  | { readonly mode: 'token'; readonly token: () => DashboardToken | undefined };

export interface DashboardRoutes {
  /** Answers a dashboard path (`search` is the query string, '' or '?…'); false when `path` is not one. */
  handle(req: IncomingMessage, res: ServerResponse, path: string, search: string): boolean;
}

/** Answers a request the access does not let through (true), or leaves it to be served (false). */
function refuse(
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  search: string,
  access: DashboardAccess,
): boolean {
  if (access.mode === 'open') return false;
  const decision = decideAccess(req, path, search, access.token());
  switch (decision.kind) {
    case 'allow':
      return false;
    case 'login':
      // 303 to the same page without the token, so it leaves the address bar, the history and any Referer.
      res.writeHead(303, { ...SECURITY_HEADERS, location: decision.location, 'set-cookie': decision.cookie });
      res.end();
      return true;
    case 'deny':
      res.writeHead(401, {
        ...SECURITY_HEADERS,
        'content-type': 'text/html; charset=utf-8',
        'www-authenticate': 'Bearer realm="agn fleet dashboard"',
      });
      res.end(req.method === 'HEAD' ? undefined : DENIED_PAGE);
      return true;
    case 'unavailable':
      res.writeHead(503, { ...SECURITY_HEADERS, 'content-type': 'text/plain; charset=utf-8' });
      res.end(UNAVAILABLE_TEXT);
      return true;
  }
}

export function dashboardRoutes(view: () => Promise<unknown>, access: DashboardAccess): DashboardRoutes {
  const assets = loadAssets();
  let streams = 0;
  const sendJson = (res: ServerResponse): void => {
    view().then(
      (model) => {
        res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': 'application/json' });
        res.end(JSON.stringify(model));
      },
      () => {
        res.writeHead(503, { ...SECURITY_HEADERS, 'content-type': 'text/plain; charset=utf-8' });
        res.end('dashboard view unavailable\n');
      },
    );
  };
  const openStream = (req: IncomingMessage, res: ServerResponse): void => {
    if (streams >= MAX_EVENT_STREAMS) {
      res.writeHead(503, { ...SECURITY_HEADERS, 'content-type': 'text/plain; charset=utf-8', 'retry-after': '5' });
      res.end('too many dashboard streams\n');
      return;
    }
    streams += 1;
    res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': 'text/event-stream', connection: 'keep-alive' });
    res.write('retry: 2000\n\n');
    let last = '';
    let busy = false;
    const push = (): void => {
      if (busy) return;
      busy = true;
      view()
        .then(
          (model) => {
            const print = fingerprint(model);
            if (print !== last && !res.writableEnded) {
              last = print;
              res.write(`data: ${JSON.stringify(model)}\n\n`);
            }
          },
          () => undefined,
        )
        .finally(() => (busy = false));
    };
    push();
    const tick = setInterval(push, EVENT_INTERVAL_MS);
    const heartbeat = setInterval(() => res.write(': keep-alive\n\n'), HEARTBEAT_MS);
    const close = (): void => {
      clearInterval(tick);
      clearInterval(heartbeat);
      streams -= 1;
    };
    req.socket.setTimeout(0);
    res.once('close', close);
  };
  return {
    handle(req, res, path, search) {
      if (path !== '/dashboard' && !path.startsWith(DASHBOARD_PATH)) return false;
      if (refuse(req, res, path, search, access)) return true;
      if (path === '/dashboard') {
        res.writeHead(308, { location: DASHBOARD_PATH, 'cache-control': 'no-store' });
        res.end();
        return true;
      }
      const rest = path.slice(DASHBOARD_PATH.length);
      if (rest === 'model.json') sendJson(res);
      else if (rest === 'events') openStream(req, res);
      else {
        const asset = assets.get(rest);
        if (asset === undefined) return false;
        res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': asset.type });
        res.end(req.method === 'HEAD' ? undefined : asset.body);
      }
      return true;
    },
  };
}
