// The HTTP(S) shell: listeners, OpenAI-compatible route table, request context, error answers, metrics, and
// graceful shutdown. Routing and authorization live in the filters; this file only moves bytes and records.
import { createHash, randomInt } from 'node:crypto';
import { createServer as createHttpServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { GatewayResponse } from './response.ts';
import { createServer as createHttpsServer } from 'node:https';
import { Server as NetServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import type { Server as TlsServer, TLSSocket } from 'node:tls';
import { parseListenAddress, startAdminServer } from '../shared/admin-server.ts';
import type { AdminServer } from '../shared/admin-server.ts';
import type { Logger } from '../shared/log.ts';
import { errorFields } from '../shared/log.ts';
import type { GatewayRole, ResolvedConfig, ResolvedListener } from './config.ts';
import type { GatewayRequest, PeerIdentity } from './context.ts';
import { createRequestIdGenerator } from './routing/request-id.ts';
import { CandidateLoad, LOAD_PATHS, endLoad } from './routing/candidate-load.ts';
import { GatewayError, badRequest, errorBody, methodNotAllowed, notFound, unavailable } from './errors.ts';
import { HOP_BY_HOP, startLoadBalancer } from './filters/load-balancer.ts';
import { GatewayFiles } from './gateway-files.ts';
import { type ListenerTls, MAX_TLS_FILE_BYTES, listenerContextOptions, listenerTlsFiles } from './tls-files.ts';
import type { LoadBalancer } from './filters/load-balancer.ts';
import { createGatewayMetrics } from './metrics.ts';
import type { GatewayMetrics } from './metrics.ts';
import { OverlayStore } from './overlay-store.ts';
import { buildPipeline, runPipeline } from './pipeline.ts';
import { SiteRouteMetrics } from './site-route/metrics.ts';
import { SpendLedger } from './usage/spend-ledger.ts';
import { TokenFile } from '../shared/token-file.ts';
import { AgeEvidence, BudgetView, startOperatorReporter } from './operator-reporter.ts';
import { KeyQuota } from './usage/key-quota.ts';
import type { OperatorReporter } from './operator-reporter.ts';
import { createUsageMetrics } from './usage/usage-metrics.ts';
import type { Pipeline } from './pipeline.ts';
import { listen } from '../shared/listen.ts';
import { createSiteViewService, type ServingOptions } from './site-route/site-view-service.ts';
import type { SiteView } from './site-route/site-view.ts';
import { warmRequestPath } from './warmup.ts';
import { agentMetrics } from './agents/agent-metrics.ts';
import type { GatewayTracing } from './tracing/tracing.ts';
import type { IntelligentRouteFilter, McpRouteFilter } from '../../schemas/generated/gateway-config.ts';

const INFERENCE_POST_PATHS = new Set(['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/responses']);
const RESPONSES_SUBRESOURCE = /^\/v1\/responses\/[A-Za-z0-9_.-]{1,256}(\/(cancel|input_items))?$/;
const REQUEST_HEADERS_NOT_FORWARDED = new Set([...HOP_BY_HOP, 'host', 'content-length', 'expect']);
// A `.` or `..` segment, raw or percent-encoded, or an empty segment: a backend that normalises the path would serve
// another resource than the one routed and authorized (`/v1/responses/../cancel`), so the path is refused, not rewritten.
const DOT_OR_EMPTY_SEGMENT = /\/(?:\.|%2e){1,2}(?:\/|$)|\/\//i;
/**
 * How long a listener keeps an idle keep-alive connection (announced as `Keep-Alive: timeout=75`; undici clients
 * close theirs 2 s before that). Longer than the idle gaps between a consumer's bursts of traffic, so the consumer
 * -> provider hop keeps its mTLS connections instead of redoing the handshakes after every pause (at Node's default
 * 5 s, a 3 s gap is enough to lose them); nginx's keepalive_timeout default is the same 75 s.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 75_000;
/** Connections one listener holds open at once unless `max_connections` says otherwise; more are closed at accept. */
const DEFAULT_MAX_CONNECTIONS = 4096;

export interface ListenerInfo {
  readonly name: string;
  readonly host: string;
  readonly port: number;
  readonly tls: boolean;
}

export interface GatewayInstance {
  readonly role: GatewayRole;
  readonly listeners: readonly ListenerInfo[];
  readonly adminPort: number | undefined;
  readonly metrics: GatewayMetrics;
  readonly overlay: OverlayStore | undefined;
  /** Cumulative priced spend per tenant recorded by usage_meter. */
  readonly spend: SpendLedger;
  /** The spend and age reporter toward the site operator (usage_meter.report), when configured. */
  readonly reporter: OperatorReporter | undefined;
  /** Relayed ages this process refused: a reader of relayed signal ages counts here, the reporter sends the count. */
  readonly ages: AgeEvidence;
  /** The serving config and site signals, when the gateway is given a serving config. */
  readonly siteView: SiteView | undefined;
  isReady(): boolean;
  /**
   * Called whenever what isReady() and the accepted revision depend on may have changed: an overlay or serving config
   * accepted, or close() begun. Not for a SiteView passed in the options, which this gateway does not load.
   */
  onStateChange(listener: () => void): void;
  /**
   * Re-reads every mounted file now (SIGHUP): caller keys, credential files, listener and upstream TLS. They are also
   * followed on disk, so this only makes a change take effect without waiting for the watch.
   */
  reloadFiles(): Promise<void>;
  close(): Promise<void>;
}

export interface StartGatewayOptions {
  configDir: string;
  logger: Logger;
  /** Overlay poll interval; tests shorten or disable it. */
  overlayPollIntervalMs?: number;
  /** Safety re-read interval of the mounted files (gateway-files.ts); 0 leaves only the watch (tests). */
  filePollIntervalMs?: number;
  /** Collect process metrics (off for in-process tests that start several gateways). */
  processMetrics?: boolean;
  /** Report this thread's event-loop delay. @default processMetrics (a worker thread: on, without process metrics) */
  eventLoopMetrics?: boolean;
  /**
   * How long close() keeps accepting, already reporting not ready, before the listeners close: the time a Service
   * needs to take the pod out of its endpoints, so clients stop connecting before connections would be refused.
   * @default 0
   */
  drainDelayMs?: number;
  /** GRID_SERVING_CONFIG and the signals client identity: builds the SiteView grid_site_route reads. */
  serving?: ServingOptions;
  /** A SiteView built elsewhere (in-process grids, tests) instead of one from `serving`. */
  siteView?: SiteView;
  /** Random source of the route filters' draws (Math.random); a test seeds it to make its draws reproducible. */
  random?: () => number;
  /**
   * Requests the gateway sends itself over loopback (warmup.ts) after its listeners are bound and before it reports
   * ready, so its first real requests run warm code. main.ts sets WARMUP_REQUESTS; in-process tests leave it off.
   * @default 0
   */
  warmupRequests?: number;
  /** Bind the listeners with SO_REUSEPORT, so the other workers of this gateway bind the same ports (workers.ts). */
  reusePort?: boolean;
  /** OpenTelemetry tracing (tracing/tracing.ts, from the OTEL_* environment); undefined: off. */
  tracing?: GatewayTracing;
}

const peerCache = new WeakMap<Socket, PeerIdentity | null>();

function peerIdentity(socket: Socket): PeerIdentity | null {
  const cached = peerCache.get(socket);
  if (cached !== undefined) return cached;
  let identity: PeerIdentity | null = null;
  const tls = socket as TLSSocket;
  if (typeof tls.getPeerCertificate === 'function' && tls.authorized === true) {
    const cert = tls.getPeerCertificate();
    if (cert !== undefined && cert.raw !== undefined) {
      const org = cert.subject?.O as string | string[] | undefined;
      identity = {
        certDigest: createHash('sha256').update(cert.raw).digest('hex'),
        organizations: org === undefined ? [] : Array.isArray(org) ? org : [org],
        serialNumber: (cert.serialNumber ?? '').toLowerCase(),
      };
    }
  }
  peerCache.set(socket, identity);
  return identity;
}

function sendError(res: ServerResponse, error: GatewayError, closing: boolean): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = errorBody(error);
  res.writeHead(error.status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    ...error.headers,
    ...(closing ? { connection: 'close' } : {}),
  });
  res.end(body);
}

function createListenerServer(
  listener: ResolvedListener,
  tls: ListenerTls | undefined,
  handler: (req: IncomingMessage, res: GatewayResponse) => void,
): Server {
  const l = listener.listener;
  const headerTimeout = l.header_timeout_ms ?? 10_000;
  const common = {
    ServerResponse: GatewayResponse,
    maxHeaderSize: l.max_header_bytes ?? 16_384,
    headersTimeout: headerTimeout,
    requestTimeout: Math.max(l.request_timeout_ms ?? 60_000, headerTimeout),
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    // Timeouts are enforced on this tick; keep it well under the shortest timeout so slow clients go promptly.
    connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(headerTimeout / 4))),
  };
  if (l.tls === undefined || tls === undefined) return createHttpServer(common, handler);
  const mode = l.tls.client_cert_mode ?? 'none';
  return createHttpsServer(
    {
      ...common,
      ...listenerContextOptions(tls),
      requestCert: mode !== 'none',
      rejectUnauthorized: mode === 'require',
      handshakeTimeout: headerTimeout,
    },
    handler,
  );
}

function requestHeaders(req: IncomingMessage): Map<string, string | string[]> {
  // Runs on every request: a plain key loop, and the Connection header's tokens only when it names more than the
  // usual keep-alive/close.
  const connection = req.headers['connection'];
  const connectionTokens =
    connection === undefined || connection === 'keep-alive' || connection === 'close'
      ? undefined
      : connection
          .toLowerCase()
          .split(',')
          .map((t) => t.trim());
  const headers = new Map<string, string | string[]>();
  const raw = req.headers;
  for (const name in raw) {
    const value = raw[name];
    if (value === undefined || REQUEST_HEADERS_NOT_FORWARDED.has(name) || connectionTokens?.includes(name)) continue;
    headers.set(name, value);
  }
  return headers;
}

/** How long, after the listeners close, a connection accepted just before may take to deliver its request. */
const ACCEPTED_GRACE_MS = 250;

export async function startGateway(resolved: ResolvedConfig, options: StartGatewayOptions): Promise<GatewayInstance> {
  const { logger, configDir } = options;
  const tracing = options.tracing;
  const role = resolved.role;
  const metrics = createGatewayMetrics(role, {
    process: options.processMetrics ?? true,
    eventLoop: options.eventLoopMetrics ?? options.processMetrics ?? true,
  });
  const files = new GatewayFiles({
    configDir,
    logger,
    metrics,
    ...(options.filePollIntervalMs === undefined ? {} : { pollIntervalMs: options.filePollIntervalMs }),
  });
  const usage = {
    metrics: createUsageMetrics(metrics.registry),
    ledger: new SpendLedger(),
    quota: new KeyQuota(),
    budgets: new BudgetView(),
  };
  let closing = false;
  let inFlight = 0;
  const nextRequestId = createRequestIdGenerator({
    nowMicros: () => Math.round((performance.timeOrigin + performance.now()) * 1000),
    processTag: randomInt(0, 0x10000),
  });
  let idleResolve: (() => void) | null = null;

  // Relayed signal ages this process refuses (implausible age_ms in a site's answer): the age report's skewCount.
  const ages = new AgeEvidence();
  const serving =
    options.serving === undefined
      ? undefined
      : createSiteViewService(options.serving, {
          logger,
          registry: metrics.registry,
          onRefusedAges: (n) => ages.reject(n),
        });
  const siteView = options.siteView ?? serving?.view;
  const siteRouteMetrics = siteView === undefined ? undefined : new SiteRouteMetrics(metrics.registry);
  // One per gateway (each worker its own): every listener's route filter counts into it, so a candidate reached from
  // two listeners carries both listeners' requests. Only route filters with local_load use it.
  const candidateLoad = new CandidateLoad();
  // One overlay store per overlay file (intelligent_route's, mcp_route's): routes sharing a file share the snapshot.
  const stores = new Map<string, OverlayStore>();
  function overlayStore(filter: IntelligentRouteFilter | McpRouteFilter): OverlayStore {
    const file = filter.overlay_file.startsWith('/') ? filter.overlay_file : `${configDir}/${filter.overlay_file}`;
    let store = stores.get(file);
    if (store === undefined) {
      store = new OverlayStore({
        file,
        ...(filter.expected_overlay_scope === undefined ? {} : { expectedScope: filter.expected_overlay_scope }),
        reloadEnabled: filter.reload?.enabled !== false,
        debounceMs: filter.reload?.debounce_ms ?? 250,
        ...(options.overlayPollIntervalMs === undefined ? {} : { pollIntervalMs: options.overlayPollIntervalMs }),
        logger,
        metrics,
      });
      stores.set(file, store);
    }
    return store;
  }
  // Only a gateway that routes agent traffic shows the agent series.
  const agents = resolved.listeners.some((l) =>
    l.filters.some((f) => f.filter === 'mcp_route' || f.filter === 'a2a_route' || f.filter === 'agent_provider_route'),
  )
    ? agentMetrics(metrics.registry)
    : undefined;
  const loadBalancers: LoadBalancer[] = [];
  const servers: { server: Server; listener: ResolvedListener; pipeline: Pipeline }[] = [];
  /** A start step that reads TLS files the gateway cannot start without: on failure nothing opened so far stays behind. */
  const opening = async <T>(step: () => Promise<T>): Promise<T> => {
    try {
      return await step();
    } catch (error) {
      files.close();
      await Promise.all(loadBalancers.map((lb) => lb.close(false)));
      throw error;
    }
  };
  for (const listener of resolved.listeners) {
    const lbConfig = listener.filters.find((f) => f.filter === 'load_balancer');
    if (lbConfig?.filter !== 'load_balancer')
      throw new Error(`listener ${listener.listener.name} has no load_balancer`);
    const loadBalancer = await opening(() =>
      startLoadBalancer({ config: lbConfig, files, metrics, logger, isClosing: () => closing }),
    );
    loadBalancers.push(loadBalancer);
    const ir = listener.filters.find((f) => f.filter === 'intelligent_route');
    const mcp = listener.filters.find((f) => f.filter === 'mcp_route');
    const store = ir?.filter === 'intelligent_route' ? overlayStore(ir) : undefined;
    const mcpOverlay = mcp?.filter === 'mcp_route' ? overlayStore(mcp) : undefined;
    const pipeline = buildPipeline(listener, {
      files,
      logger,
      loadBalancer,
      overlay: store,
      mcpOverlay,
      ...(agents === undefined ? {} : { agentMetrics: agents }),
      usage,
      candidateLoad,
      ...(siteView === undefined ? {} : { siteView, siteRouteMetrics }),
      ...(options.random === undefined ? {} : { random: options.random }),
    });
    // The listener's certificates and client CA, followed on disk: renewed material is set on the server, so new
    // connections present the new certificate (and check peers against the new CA) while open ones continue. A TLS
    // session from before does not resume after a change (setSecureContext draws new ticket keys).
    let tlsServer: TlsServer | undefined;
    const tls =
      listener.listener.tls === undefined
        ? undefined
        : await opening(() =>
            files.require<ListenerTls>({
              kind: 'listener_tls',
              name: listener.listener.name,
              ...listenerTlsFiles(listener.listener, (path) => files.resolve(path)),
              maxBytes: MAX_TLS_FILE_BYTES,
              use: (next, previous) => {
                if (previous !== undefined) tlsServer?.setSecureContext(listenerContextOptions(next));
              },
              fields: (material) => ({ certificates: material.fingerprints }),
            }),
          );
    const server = createListenerServer(listener, tls, (req, res) => handle(req, res, pipeline, loadBalancer));
    if (tls !== undefined) tlsServer = server as unknown as TlsServer;
    server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
      // Malformed requests (bad framing, a malformed Transfer-Encoding), oversized heads and slow clients: answer
      // with a status while no response has started, then destroy the socket, so a refused connection never keeps
      // its file descriptor waiting for the client to close.
      const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
      const reason =
        status === 431 ? 'Request Header Fields Too Large' : status === 408 ? 'Request Timeout' : 'Bad Request';
      const pending = (socket as { _httpMessage?: ServerResponse | null })._httpMessage ?? null;
      if (pending !== null && !pending.headersSent && !pending.destroyed) {
        // The head was routed and the body then broke the framing (a malformed chunk or Transfer-Encoding): the
        // pipeline is still waiting for that body, so the answer goes through its response (and its log line).
        sendError(
          pending,
          new GatewayError(
            status,
            'malformed_request',
            'invalid_request_error',
            `malformed request: ${reason.toLowerCase()} (${error.code ?? 'parse error'})`,
          ),
          true,
        );
      } else if (pending === null && socket.writable) {
        socket.end(`HTTP/1.1 ${status} ${reason}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`, () =>
          socket.destroy(),
        );
      } else {
        socket.destroy();
      }
      // A client that does not read its answer cannot hold the socket open either.
      if (!socket.destroyed) setTimeout(() => socket.destroy(), 1_000).unref();
      logger.debug({ listener: listener.listener.name, code: error.code ?? 'unknown', status }, 'client error');
    });
    server.maxConnections = listener.listener.max_connections ?? DEFAULT_MAX_CONNECTIONS;
    server.on('drop', () => {
      logger.debug(
        { listener: listener.listener.name, max_connections: server.maxConnections },
        'connection refused: listener at max_connections',
      );
    });
    // Per connection, not per request: how often peers (a consumer's hop pool) have to redo TLS.
    server.on('secureConnection', (socket: TLSSocket) => {
      metrics.tlsHandshakes.inc({
        listener: listener.listener.name,
        session: socket.isSessionReused() ? 'resumed' : 'new',
      });
    });
    server.on('tlsClientError', (error: NodeJS.ErrnoException) => {
      logger.info({ listener: listener.listener.name, code: error.code ?? 'unknown' }, 'TLS handshake rejected');
    });
    servers.push({ server, listener, pipeline });
  }

  const overlay = stores.values().next().value;

  // Per-status/model/cluster children of the requests counter: prom-client hashes a label object on every inc,
  // so the answered-request count is kept here and added to the counter when it is collected.
  const answered = new Map<
    string,
    { labels: { role: GatewayRole; model: string; cluster: string; status: string }; count: number }
  >();
  metrics.onCollect(() => {
    // Every cell's cluster, idle ones at 0, so the series shows the count returning to 0 rather than vanishing.
    if (candidateLoad.size > 0) {
      metrics.candidateInFlight.reset();
      for (const [cluster, count] of candidateLoad.byCluster()) metrics.candidateInFlight.set({ cluster }, count);
    }
    for (const path of LOAD_PATHS) {
      const count = candidateLoad.selections[path];
      if (count === 0) continue;
      metrics.selections.inc({ path }, count);
      candidateLoad.selections[path] = 0;
    }
    metrics.inFlight.set({ role }, inFlight);
    for (const entry of answered.values()) {
      if (entry.count === 0) continue;
      metrics.requests.inc(entry.labels, entry.count);
      entry.count = 0;
    }
  });
  const debugEnabled = logger.isLevelEnabled('debug');

  function handle(
    req: IncomingMessage,
    res: GatewayResponse,
    pipeline: Pipeline,
    loadBalancer: LoadBalancer,
    counted = true,
  ): void {
    inFlight++;
    const requestId = nextRequestId();
    // Before any answer is written, so errors carry it as well as upstream responses (response.ts adds it to the head).
    res.requestId = requestId;
    const target = req.url ?? '/';
    const query = target.indexOf('?');
    const request: GatewayRequest = {
      req,
      res,
      method: req.method ?? 'GET',
      path: query === -1 ? target : target.slice(0, query),
      target,
      headers: requestHeaders(req),
      receivedAtNs: process.hrtime.bigint(),
      requestId,
      callerGone: false,
      upstream: undefined,
      peer: peerIdentity(req.socket),
      body: null,
      model: undefined,
      cluster: undefined,
      credential: undefined,
      snapshot: undefined,
      tenant: undefined,
      callerKeyId: undefined,
      routedSite: undefined,
      responseObserver: undefined,
      labels: { model: 'none', cluster: 'none' },
      failover: undefined,
      failoverState: undefined,
      load: undefined,
      pinnedEndpoint: undefined,
      endpointIndex: undefined,
      // Warm-up requests are not the caller's: no span for them.
      trace:
        tracing === undefined || !counted
          ? undefined
          : tracing.begin(role, req.method ?? 'GET', query === -1 ? target : target.slice(0, query), req.headers),
    };
    res.on('close', () => {
      if (!res.writableFinished) {
        request.callerGone = true;
        request.upstream?.callerGone();
      }
      // The response ended, broke off or lost its caller: either way the candidate no longer carries this request.
      if (request.load !== undefined) endLoad(request);
      request.trace?.end(res.statusCode, res.writableFinished);
      if (request.labels.model === 'none' && request.model !== undefined) request.labels.model = 'other';
      const status = res.statusCode;
      if (counted) {
        const key = `${status}\u0000${request.labels.model}\u0000${request.labels.cluster}`;
        const entry = answered.get(key);
        if (entry !== undefined) entry.count++;
        else
          answered.set(key, {
            labels: { role, model: request.labels.model, cluster: request.labels.cluster, status: String(status) },
            count: 1,
          });
      }
      // Warm-up requests (counted false) stay out of the request log as they stay out of the metrics.
      if (debugEnabled && counted) {
        logger.debug(
          {
            method: request.method,
            path: request.path,
            status,
            model: request.labels.model,
            cluster: request.labels.cluster,
            revision: request.snapshot?.revision ?? null,
            duration_ms: Number(process.hrtime.bigint() - request.receivedAtNs) / 1e6,
            completed: res.writableFinished,
          },
          'request',
        );
      }
      inFlight--;
      if (inFlight === 0 && idleResolve !== null) idleResolve();
    });
    const fail = (error: unknown): void => {
      // The client went away or broke the framing mid-body (answered in clientError): nothing left to answer.
      if (request.callerGone || req.errored !== null) return;
      if (error instanceof GatewayError) {
        sendError(res, error, closing || error.headers['connection'] === 'close');
        if (error.status >= 500)
          logger.info(
            { code: error.code, status: error.status, cluster: request.cluster, model: request.labels.model },
            error.message,
          );
        return;
      }
      logger.error({ error: errorFields(error), path: request.path }, 'request failed unexpectedly');
      sendError(
        res,
        new GatewayError(500, 'internal_error', 'upstream_error', 'the gateway failed to handle the request'),
        closing,
      );
    };
    // A request that reaches a closing gateway was accepted on a connection opened before the listener closed:
    // it is served (its response closes the connection), never refused.
    let pending: void | Promise<void>;
    try {
      pending = route(request, pipeline, loadBalancer, fail);
    } catch (error) {
      fail(error);
      return;
    }
    if (pending !== undefined) pending.catch(fail);
  }

  /** Synchronous until a filter returns a Promise (reading the body, the upstream call): no await per step. */
  function route(
    request: GatewayRequest,
    pipeline: Pipeline,
    loadBalancer: LoadBalancer,
    fail: (error: unknown) => void,
  ): void | Promise<void> {
    const { method, path, target } = request;
    if (!target.startsWith('/')) throw notFound('unknown_path', 'request target must be an absolute path');
    if (DOT_OR_EMPTY_SEGMENT.test(path))
      throw badRequest('invalid_path', 'request path has a "." or ".." segment or an empty segment');
    if (path === '/v1/models') {
      if (method !== 'GET' && method !== 'HEAD') throw methodNotAllowed('GET');
      // Authorization still comes first: the filters before the route filter (peer_identity_trust) run.
      return listModels(request, pipeline);
    }
    for (const route of pipeline.pathRoutes) {
      if (path.startsWith(route.prefix)) {
        runPipeline(route.pipeline, request, metrics, loadBalancer, fail);
        return;
      }
    }
    if (pipeline.routeIndex === -1) throw notFound('unknown_path', `no route for ${path.slice(0, 128)}`);
    if (INFERENCE_POST_PATHS.has(path)) {
      if (method !== 'POST') throw methodNotAllowed('POST');
    } else if (RESPONSES_SUBRESOURCE.test(path)) {
      if (method !== 'GET' && method !== 'POST' && method !== 'DELETE') throw methodNotAllowed('GET, POST, DELETE');
    } else {
      throw notFound('unknown_path', `no route for ${path.slice(0, 128)}`);
    }
    runPipeline(pipeline, request, metrics, loadBalancer, fail);
  }

  async function listModels(request: GatewayRequest, pipeline: Pipeline): Promise<void> {
    for (let i = 0; i < pipeline.routeIndex; i++) await pipeline.filters[i]!.apply(request);
    const models = pipeline.listModels();
    if (models === null) throw unavailable('overlay_not_loaded', 'no routing overlay has been accepted yet', 5);
    const body = JSON.stringify({
      object: 'list',
      data: models.map((id) => ({ id, object: 'model', created: 0, owned_by: 'agn' })),
    });
    request.res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      ...(closing ? { connection: 'close' } : {}),
    });
    request.res.end(request.method === 'HEAD' ? undefined : body);
  }

  // Caller keys and credential files: one that cannot be read leaves its requests answered 503, not the gateway down.
  await files.start();
  // Cold start: an invalid or missing overlay keeps the gateway not ready, but it still starts and keeps watching.
  for (const store of stores.values()) await store.start();
  await serving?.start();

  const listeners: ListenerInfo[] = [];
  for (const { server, listener } of servers) {
    const { host, port } = parseListenAddress(listener.listener.address);
    await listen(server, port, host, options.reusePort ?? false);
    const bound = server.address() as AddressInfo;
    listeners.push({ name: listener.listener.name, host, port: bound.port, tls: listener.listener.tls !== undefined });
  }

  const stateListeners = new Set<() => void>();
  const stateChanged = (): void => {
    for (const listener of stateListeners) listener();
  };
  for (const store of stores.values()) store.onAccepted(stateChanged);
  serving?.store.onAccepted(stateChanged);

  let warm = (options.warmupRequests ?? 0) === 0;
  // A grid_site_route gateway is ready once it holds a serving config, as an overlay gateway once it holds an overlay.
  const isReady = (): boolean =>
    warm &&
    !closing &&
    [...stores.values()].every((s) => s.current() !== null) &&
    (siteView === undefined || siteView.revision() !== undefined);
  if (!warm) {
    const result = await warmRequestPath({ role, logger, serve: handle, requests: options.warmupRequests });
    warm = true;
    logger.info({ requests: result.requests, failed: result.failed, duration_ms: result.ms }, 'request path warmed up');
  }
  const adminAddress = resolved.config.admin?.address ?? resolved.config.admin?.metrics_address;
  let admin: AdminServer | undefined;
  if (adminAddress !== undefined) {
    admin = await startAdminServer({
      address: adminAddress,
      registry: metrics.registry,
      isReady,
      status: () => ({
        role,
        ready: isReady(),
        accepted_revision: overlay?.current()?.revision ?? null,
        listeners,
      }),
    });
  }
  const reportConfig = resolved.listeners
    .flatMap((l) => l.filters)
    .find((f) => f.filter === 'usage_meter' && f.report !== undefined);
  const report = reportConfig?.filter === 'usage_meter' ? reportConfig.report : undefined;
  // The ingest token is read here and on every change of its file, never on a request or a report.
  const tokenPath = report?.token_file;
  const ingestToken =
    tokenPath === undefined
      ? undefined
      : new TokenFile({
          file: tokenPath.startsWith('/') ? tokenPath : `${configDir}/${tokenPath}`,
          what: 'ingest token (usage_meter.report.token_file)',
          logger,
        });
  await ingestToken?.start();
  const reporter: OperatorReporter | undefined =
    report !== undefined
      ? startOperatorReporter({
          url: report.url,
          intervalMs: report.interval_ms ?? 5_000,
          spend: usage.ledger,
          budgets: usage.budgets,
          ages,
          logger,
          ...(ingestToken === undefined ? {} : { token: () => ingestToken.current() }),
        })
      : undefined;
  // Read when scraped, not on a timer: exact at every scrape, and an idle gateway is not woken twice a second for it.
  metrics.onCollect(() => metrics.ready.set(isReady() ? 1 : 0));

  const shutdownMs = (resolved.config.shutdown_timeout_secs ?? 5) * 1000;
  return {
    role,
    listeners,
    adminPort: admin?.port,
    metrics,
    overlay,
    spend: usage.ledger,
    reporter,
    ages,
    siteView,
    isReady,
    onStateChange(listener) {
      stateListeners.add(listener);
    },
    reloadFiles: () => files.reload(),
    async close() {
      if (closing) return;
      closing = true;
      stateChanged();
      for (const store of stores.values()) store.close();
      files.close();
      if ((options.drainDelayMs ?? 0) > 0)
        await new Promise<void>((resolve) => setTimeout(resolve, options.drainDelayMs).unref());
      // Stop accepting, but do not yet close connections without a request: http.Server.close() would, and a
      // connection accepted a moment ago whose request is still on the wire counts as idle, so its client would
      // see a reset for a request the gateway had accepted. They get ACCEPTED_GRACE_MS to deliver it.
      for (const { server } of servers) NetServer.prototype.close.call(server);
      await new Promise<void>((resolve) => setTimeout(resolve, ACCEPTED_GRACE_MS).unref());
      for (const { server } of servers) server.closeIdleConnections();
      if (inFlight > 0) {
        await Promise.race([
          new Promise<void>((resolve) => {
            idleResolve = resolve;
          }),
          new Promise<void>((resolve) => setTimeout(resolve, shutdownMs).unref()),
        ]);
      }
      for (const { server } of servers) server.closeAllConnections();
      await Promise.all(loadBalancers.map((lb) => lb.close(inFlight === 0)));
      // Last: the spend of the requests that just drained still reaches the operator.
      await reporter?.close();
      ingestToken?.close();
      await serving?.close();
      await admin?.close();
      // Last: the spans of the requests that just drained are sent.
      await tracing?.close().catch(() => undefined);
    },
  };
}
