/**
 * The fleet dashboard on the admin listener: the page and its assets (daemons/shared/dashboard/, plain files
 * versioned with the daemons, no framework, nothing fetched from elsewhere), the read model as JSON, and a
 * server-sent event stream that pushes the read model whenever it changes, so the page updates without reloads.
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';

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
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
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

export interface DashboardRoutes {
  /** Answers a dashboard path; false when `path` is not one. */
  handle(req: IncomingMessage, res: ServerResponse, path: string): boolean;
}

export function dashboardRoutes(view: () => Promise<unknown>): DashboardRoutes {
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
      view().then(
        (model) => {
          const print = fingerprint(model);
          if (print !== last && !res.writableEnded) {
            last = print;
            res.write(`data: ${JSON.stringify(model)}\n\n`);
          }
        },
        () => undefined,
      ).finally(() => (busy = false));
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
    handle(req, res, path) {
      if (path === '/dashboard') {
        res.writeHead(308, { location: DASHBOARD_PATH, 'cache-control': 'no-store' });
        res.end();
        return true;
      }
      if (!path.startsWith(DASHBOARD_PATH)) return false;
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
