// The admin listener every daemon exposes on its own port: /livez, /readyz, /metrics (and /status when a
// daemon supplies one; the fleet dashboard under /dashboard/ when the operator supplies its view). It never shares a port with traffic, so probes work while the data plane is saturated.
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { type DashboardAccess, dashboardRoutes } from './dashboard-routes.ts';
import { listen } from './listen.ts';

export interface AdminServerOptions {
  /** `host:port`; port 0 picks a free port (tests). */
  address: string;
  /** A prom-client Registry, or anything that renders one view the same way (the gateway's aggregate of its workers). */
  registry: Pick<Registry, 'metrics' | 'contentType'>;
  isLive?: () => boolean;
  isReady: () => boolean;
  /** JSON document served at /status. */
  status?: () => unknown;
  /**
   * The fleet dashboard: its read model (the page, /dashboard/model.json and /dashboard/events) and who may open it.
   * Absent: the dashboard is off and its paths answer 404 like any other unknown path.
   */
  dashboard?: { readonly view: () => Promise<unknown>; readonly access: DashboardAccess };
}

export interface AdminServer {
  readonly port: number;
  readonly host: string;
  close(): Promise<void>;
}

/** Splits `host:port`, `[v6]:port` or `:port` (all interfaces) into parts; throws with the offending text. */
export function parseListenAddress(address: string): { host: string; port: number } {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s]*)):(\d{1,5})$/.exec(address.trim());
  const port = match === null ? NaN : Number(match[3]);
  if (match === null || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`invalid listen address "${address}": expected host:port, e.g. 127.0.0.1:9901`);
  }
  const host = match[1] ?? match[2] ?? '';
  return { host: host === '' ? '0.0.0.0' : host, port };
}

export async function startAdminServer(options: AdminServerOptions): Promise<AdminServer> {
  const { host, port } = parseListenAddress(options.address);
  const dashboard =
    options.dashboard === undefined ? undefined : dashboardRoutes(options.dashboard.view, options.dashboard.access);
  const server: Server = createServer((req, res) => {
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const path = query < 0 ? url : url.slice(0, query);
    const search = query < 0 ? '' : url.slice(query);
    const send = (status: number, body: string, type = 'text/plain; charset=utf-8'): void => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
      res.end(body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(405, 'method not allowed\n');
      return;
    }
    switch (path) {
      case '/livez':
        if (options.isLive === undefined || options.isLive()) send(200, 'ok\n');
        else send(503, 'not live\n');
        return;
      case '/readyz':
        if (options.isReady()) send(200, 'ready\n');
        else send(503, 'not ready\n');
        return;
      case '/metrics':
        options.registry.metrics().then(
          (text) => send(200, text, options.registry.contentType),
          () => send(500, 'metrics unavailable\n'),
        );
        return;
      case '/status':
        if (options.status !== undefined) {
          send(200, `${JSON.stringify(options.status(), null, 2)}\n`, 'application/json');
          return;
        }
        break;
      default:
        if (dashboard?.handle(req, res, path, search) === true) return;
        break;
    }
    send(404, 'not found\n');
  });
  server.headersTimeout = 5_000;
  server.requestTimeout = 10_000;
  await listen(server, port, host);
  const bound = server.address() as AddressInfo;
  return {
    port: bound.port,
    host,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
