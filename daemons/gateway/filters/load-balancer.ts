// load_balancer: named clusters of endpoints, one keep-alive undici Pool per endpoint (TLS/mTLS with SNI where
// configured), round-robin over endpoints that are up, and passive health: a failed connect marks an endpoint
// down for a growing backoff. Responses stream to the client chunk by chunk with backpressure. A cluster's TLS files
// are followed on disk (gateway-files.ts): renewed material gets each endpoint a new pool, so the next request
// connects with it (a new pool has no TLS session to resume with the old certificate), while requests in flight
// finish on the old pool, which then closes.
import { isIP } from 'node:net';
import type { IncomingHttpHeaders } from 'node:http';
import { Pool, errors } from 'undici';
import type { Dispatcher } from 'undici';
import type { ClusterConfig, LoadBalancerFilter } from '../../../schemas/generated/gateway-config.ts';
import {
  NOT_DELIVERED_HEADER,
  UpstreamConnectError,
  badGateway,
  gatewayTimeout,
  unavailableNotDelivered,
} from '../errors.ts';
import type { CallerGoneListener, Filter, GatewayRequest } from '../context.ts';
import {
  RESPONSE_REQUEST_ID_HEADER,
  RESPONSE_UPSTREAM_REQUEST_ID_HEADER,
  ROUTING_CANDIDATE_HEADER,
} from '../context.ts';
import type { GatewayFiles } from '../gateway-files.ts';
import type { GatewayMetrics } from '../metrics.ts';
import { type ClusterTls, MAX_TLS_FILE_BYTES, clusterTlsFiles } from '../tls-files.ts';
import type { HistogramSeries } from '../request-histogram.ts';
import type { Logger } from '../../shared/log.ts';
import { errorFields } from '../../shared/log.ts';

const BACKOFF_BASE_MS = 1_000;
const BACKOFF_MAX_MS = 30_000;

export const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** An upstream's answer loses its hop-by-hop headers and the not-delivered marker, which only this gateway may set. */
const RESPONSE_HEADERS_NOT_FORWARDED = new Set([...HOP_BY_HOP, NOT_DELIVERED_HEADER]);

/** Errors that happen before a request byte can have reached the upstream (refused, timeout, TLS handshake). */
const CONNECT_PHASE_CODES = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_SIGNATURE_FAILURE',
  'HOSTNAME_MISMATCH',
]);

export function connectPhaseCode(error: unknown): string | undefined {
  for (
    let e: unknown = error, depth = 0;
    e instanceof Error && depth < 4;
    e = (e as { cause?: unknown }).cause, depth++
  ) {
    const code = (e as { code?: unknown }).code;
    if (typeof code !== 'string') continue;
    if (CONNECT_PHASE_CODES.has(code) || code.startsWith('ERR_TLS_') || code.startsWith('ERR_SSL_')) return code;
  }
  return undefined;
}

function errorCode(error: unknown): string {
  for (
    let e: unknown = error, depth = 0;
    e instanceof Error && depth < 4;
    e = (e as { cause?: unknown }).cause, depth++
  ) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return error instanceof Error ? error.name : 'unknown';
}

/**
 * The Host header for an endpoint: its host, with the port unless it is the scheme's default. Praxis AI's clusters
 * have no authority key (they forward the downstream Host; a later praxis-proxy-core adds a per-cluster `authority`),
 * so the dialled endpoint is the one place a config names the upstream's virtual host: an external API at
 * api.openai.com:443 gets `Host: api.openai.com`.
 */
export function hostHeaderOf(address: string, tls: boolean): string {
  const colon = address.lastIndexOf(':');
  const port = address.slice(colon + 1);
  return port === (tls ? '443' : '80') ? address.slice(0, colon) : address;
}

export class EndpointRuntime {
  readonly address: string;
  /** Position in its cluster's endpoints (what a pinned session or task names). */
  readonly index: number;
  /** Replaced when the cluster's TLS files change; a request keeps the pool it was dispatched on. */
  pool: Pool;
  readonly host: string;
  /** The TLS server name every request to this endpoint must use (tls.sni, or the endpoint's host name). */
  readonly servername: string | undefined;
  #downUntilMs = 0;
  #failures = 0;

  constructor(address: string, pool: Pool, host: string = address, servername?: string, index = 0) {
    this.address = address;
    this.index = index;
    this.pool = pool;
    this.host = host;
    this.servername = servername;
  }

  isUp(nowMs: number): boolean {
    return nowMs >= this.#downUntilMs;
  }

  markDown(nowMs: number): void {
    this.#failures++;
    this.#downUntilMs = nowMs + Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** Math.min(this.#failures - 1, 10));
  }

  markUp(): void {
    this.#failures = 0;
    this.#downUntilMs = 0;
  }
}

export class ClusterRuntime {
  readonly name: string;
  readonly endpoints: readonly EndpointRuntime[];
  readonly responseTimeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly #config: ClusterConfig;
  #cursor = 0;

  /** `tls` is the cluster's TLS material when its config has a tls block (read from its files). */
  constructor(config: ClusterConfig, tls: ClusterTls | undefined) {
    this.name = config.name;
    this.#config = config;
    this.responseTimeoutMs = config.response_timeout_ms ?? 300_000;
    this.idleTimeoutMs = config.body_idle_timeout_ms ?? 300_000;
    this.endpoints = config.endpoints.map((address, index) => {
      const host = address.slice(0, address.lastIndexOf(':')).replace(/^\[|\]$/g, '');
      const servername = config.tls?.sni ?? (isIP(host) === 0 ? host : undefined);
      const endpointServername = config.tls === undefined ? undefined : servername;
      return new EndpointRuntime(
        address,
        this.#pool(address, endpointServername, tls),
        hostHeaderOf(address, config.tls !== undefined),
        endpointServername,
        index,
      );
    });
  }

  /** Gives every endpoint a pool that connects with `tls`; returns the pools it replaced (to close once drained). */
  useTls(tls: ClusterTls): Pool[] {
    return this.endpoints.map((endpoint) => {
      const old = endpoint.pool;
      endpoint.pool = this.#pool(endpoint.address, endpoint.servername, tls);
      return old;
    });
  }

  #pool(address: string, servername: string | undefined, material: ClusterTls | undefined): Pool {
    const config = this.#config;
    const tls = config.tls;
    return new Pool(`${tls === undefined ? 'http' : 'https'}://${address}`, {
      pipelining: 1,
      // Idle connections are kept until the server's Keep-Alive hint (minus 2 s) or, without a hint, 60 s: a pause
      // in traffic does not cost new (m)TLS handshakes. A reconnect resumes the TLS session (undici caches them).
      keepAliveTimeout: 60_000,
      keepAliveMaxTimeout: 600_000,
      headersTimeout: this.responseTimeoutMs,
      bodyTimeout: this.idleTimeoutMs,
      connect: {
        timeout: config.connect_timeout_ms ?? 5_000,
        ...(tls === undefined
          ? {}
          : {
              rejectUnauthorized: tls.verify !== false,
              ...(material?.ca === undefined ? {} : { ca: material.ca }),
              ...(material?.cert === undefined ? {} : { cert: material.cert, key: material.key }),
              ...(servername === undefined ? {} : { servername }),
            }),
      },
    });
  }

  available(nowMs: number): boolean {
    return this.endpoints.some((e) => e.isUp(nowMs));
  }

  /** Next endpoint that is up, round-robin; undefined when every endpoint is backing off. */
  pick(nowMs: number): EndpointRuntime | undefined {
    for (let i = 0; i < this.endpoints.length; i++) {
      const endpoint = this.endpoints[(this.#cursor + i) % this.endpoints.length];
      if (endpoint?.isUp(nowMs)) {
        this.#cursor = (this.#cursor + i + 1) % this.endpoints.length;
        return endpoint;
      }
    }
    return undefined;
  }
}

export interface LoadBalancerOptions {
  config: LoadBalancerFilter;
  /** Where the clusters' TLS files are read and followed; needed only when a cluster has a tls block. */
  files?: GatewayFiles;
  metrics: GatewayMetrics;
  logger: Logger;
  nowMs?: () => number;
  /** True while the gateway drains: responses then carry `connection: close`. */
  isClosing: () => boolean;
}

export interface LoadBalancer extends Filter {
  readonly clusters: ReadonlyMap<string, ClusterRuntime>;
  isClusterAvailable(name: string): boolean;
  close(graceful: boolean): Promise<void>;
}

/** Reads the clusters' TLS files (throwing the first problem: the gateway does not start without them) and builds the pools. */
export async function startLoadBalancer(options: LoadBalancerOptions): Promise<LoadBalancer> {
  const now = options.nowMs ?? Date.now;
  const clusters = new Map<string, ClusterRuntime>();
  /** Pools replaced by renewed TLS material, still finishing their requests. */
  const retired = new Set<Pool>();
  const { metrics, logger } = options;
  for (const cluster of options.config.clusters) {
    if (cluster.tls === undefined) {
      clusters.set(cluster.name, new ClusterRuntime(cluster, undefined));
      continue;
    }
    const files = options.files;
    if (files === undefined)
      throw new Error(`cluster "${cluster.name}" has TLS files and the load balancer was given no file registry`);
    const tls = await files.require<ClusterTls>({
      kind: 'upstream_tls',
      name: cluster.name,
      ...clusterTlsFiles(cluster, (path) => files.resolve(path)),
      maxBytes: MAX_TLS_FILE_BYTES,
      use: (next, previous) => {
        const runtime = clusters.get(cluster.name);
        if (previous === undefined || runtime === undefined) return;
        // The old pools finish the requests already on them, then close; new requests go to the new pools.
        for (const old of runtime.useTls(next)) {
          retired.add(old);
          void old
            .close()
            .catch(() => undefined)
            .finally(() => retired.delete(old));
        }
      },
    });
    clusters.set(cluster.name, new ClusterRuntime(cluster, tls));
  }
  const role = metrics.role;

  /**
   * Sends the request to an endpoint of its cluster and streams the answer back as it arrives; the Promise settles
   * once the head is written to the caller (or the exchange failed before it). Through undici's dispatch API, not
   * `pool.request`: no response Readable, async resource or abort-signal listener per request, and the head is
   * written from the parser's callback rather than a microtask later.
   */
  function forward(request: GatewayRequest): Promise<void> {
    const name = request.cluster;
    const cluster = name === undefined ? undefined : clusters.get(name);
    if (cluster === undefined)
      throw unavailableNotDelivered('unknown_cluster', `no upstream cluster is configured for this route`);
    // A pinned request goes to its endpoint even while that one backs off: no other holds its session or task.
    const endpoint =
      request.pinnedEndpoint === undefined ? cluster.pick(now()) : cluster.endpoints[request.pinnedEndpoint];
    if (endpoint === undefined) {
      if (request.pinnedEndpoint !== undefined)
        throw unavailableNotDelivered(
          'pinned_endpoint_gone',
          `cluster "${cluster.name}" has no endpoint ${request.pinnedEndpoint}, which held this session`,
        );
      throw unavailableNotDelivered(
        'cluster_unavailable',
        `every endpoint of cluster "${cluster.name}" is backing off after connect failures`,
      );
    }
    request.endpointIndex = endpoint.index;
    request.trace?.upstreamStart(
      cluster.name,
      endpoint.address,
      request.headers.has(ROUTING_CANDIDATE_HEADER),
      request.headers,
    );

    // The request's own header Map goes to undici as it is (an iterable of pairs): no copy per request. A retry on
    // another endpoint overwrites host.
    const headers = request.headers;
    headers.set('host', endpoint.host);
    return new Promise((resolve, reject) => {
      const exchange = new UpstreamExchange(request, cluster, endpoint, resolve, reject);
      request.upstream = exchange;
      endpoint.pool.dispatch(
        {
          path: request.target,
          method: request.method as 'GET',
          headers,
          body: request.body === null || request.body.length === 0 ? null : request.body,
          // Without it undici takes the server name from the host header (the endpoint's DNS name): it reconnects with
          // that name as SNI and verifies the certificate against it instead of tls.sni, failing requests at random.
          ...(endpoint.servername === undefined ? {} : { servername: endpoint.servername }),
        },
        exchange,
      );
    });
  }

  /**
   * One request to one endpoint, as undici reports it. The response streams to the caller chunk by chunk with
   * backpressure (a slow caller pauses the upstream read instead of growing a buffer); a caller that goes away
   * aborts the upstream request (callerGone), which ends here as onResponseError.
   */
  class UpstreamExchange implements Dispatcher.DispatchHandler, CallerGoneListener {
    readonly #request: GatewayRequest;
    readonly #cluster: ClusterRuntime;
    readonly #endpoint: EndpointRuntime;
    readonly #resolve: () => void;
    readonly #reject: (error: unknown) => void;
    readonly #started = process.hrtime.bigint();
    #controller: Dispatcher.DispatchController | undefined;
    #timing: { latency: HistogramSeries; ttfb: HistogramSeries } | undefined;
    #first = true;
    #paused = false;
    #onDrain: (() => void) | undefined;
    /** The provider hop answered that it delivered the request nowhere: settled as a connect failure (retryable). */
    #notDelivered = false;

    constructor(
      request: GatewayRequest,
      cluster: ClusterRuntime,
      endpoint: EndpointRuntime,
      resolve: () => void,
      reject: (error: unknown) => void,
    ) {
      this.#request = request;
      this.#cluster = cluster;
      this.#endpoint = endpoint;
      this.#resolve = resolve;
      this.#reject = reject;
    }

    callerGone(): void {
      // Before onRequestStart (still queued for a connection) there is nothing to abort yet; onRequestStart checks.
      this.#controller?.abort(new errors.RequestAbortedError());
    }

    onRequestStart(controller: Dispatcher.DispatchController): void {
      if (this.#request.callerGone) {
        controller.abort(new errors.RequestAbortedError());
        return;
      }
      this.#controller = controller;
    }

    onResponseStart(
      _controller: Dispatcher.DispatchController,
      statusCode: number,
      upstream: IncomingHttpHeaders,
    ): void {
      // 1xx informational answers are the upstream's business with this gateway, not the caller's.
      if (statusCode < 200) return;
      // A provider gateway's own "sent nowhere" (its backend refused, say): no upstream saw the request, so it is
      // failed over like a connect failure of this hop. Only on a provider hop (the request carries a candidate), and
      // the provider gateway stays up: the endpoint is not backed off.
      if (
        (statusCode === 502 || statusCode === 503) &&
        upstream[NOT_DELIVERED_HEADER] !== undefined &&
        this.#request.headers.has(ROUTING_CANDIDATE_HEADER)
      ) {
        this.#notDelivered = true;
        _controller.abort(new errors.RequestAbortedError());
        return;
      }
      this.#endpoint.markUp();
      this.#request.trace?.upstreamHead(statusCode);
      const { res } = this.#request;
      const connection = upstream['connection'];
      const connectionTokens =
        connection === undefined || connection === 'keep-alive' || connection === 'close'
          ? undefined
          : String(connection)
              .toLowerCase()
              .split(',')
              .map((t) => t.trim());
      const outHeaders: Record<string, string | string[]> = {};
      for (const key in upstream) {
        const value = upstream[key];
        if (value === undefined || RESPONSE_HEADERS_NOT_FORWARDED.has(key) || connectionTokens?.includes(key)) continue;
        outHeaders[key] = value;
      }
      // The caller's x-request-id is this gateway's (set on the response before any answer); the upstream's own id is
      // kept beside it when no earlier hop kept one already.
      const upstreamId = outHeaders[RESPONSE_REQUEST_ID_HEADER];
      if (upstreamId !== undefined) {
        delete outHeaders[RESPONSE_REQUEST_ID_HEADER];
        if (outHeaders[RESPONSE_UPSTREAM_REQUEST_ID_HEADER] === undefined)
          outHeaders[RESPONSE_UPSTREAM_REQUEST_ID_HEADER] = upstreamId;
      }
      if (options.isClosing()) outHeaders['connection'] = 'close';
      this.#request.responseObserver?.start(statusCode, outHeaders);
      res.writeHead(statusCode, outHeaders);
      // A streamed (length-less) response shows its head at once; a sized one goes out with its first chunk.
      if (outHeaders['content-length'] === undefined) res.flushHeaders();
      this.#timing = timingOf(this.#cluster.name);
      this.#resolve();
    }

    onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
      const request = this.#request;
      if (this.#first) {
        this.#first = false;
        this.#timing!.ttfb.observe(Number(process.hrtime.bigint() - request.receivedAtNs) / 1e9);
        request.trace?.firstByte();
      }
      const observer = request.responseObserver;
      const out = observer === undefined ? chunk : observer.push(chunk);
      if (out.length > 0 && !request.res.write(out) && !this.#paused) {
        this.#paused = true;
        controller.pause();
        request.res.once(
          'drain',
          (this.#onDrain ??= () => {
            this.#paused = false;
            controller.resume();
          }),
        );
      }
    }

    onResponseEnd(): void {
      const request = this.#request;
      request.upstream = undefined;
      const tail = request.responseObserver?.end(true);
      request.res.end(tail !== undefined && tail.length > 0 ? tail : undefined);
      request.trace?.upstreamEnd(undefined);
      this.#timing!.latency.observe(Number(process.hrtime.bigint() - this.#started) / 1e9);
    }

    onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
      const request = this.#request;
      if (request.upstream === this) request.upstream = undefined;
      request.trace?.upstreamEnd(undefined, this.#notDelivered ? 'not_delivered' : errorCode(error));
      if (this.#notDelivered && !request.callerGone) {
        logger.warn(
          { cluster: this.#cluster.name, endpoint: this.#endpoint.address },
          'provider hop delivered the request nowhere; failing over',
        );
        this.#reject(new UpstreamConnectError(this.#cluster.name, this.#endpoint.address, 'NOT_DELIVERED'));
        return;
      }
      if (this.#timing === undefined) {
        this.#reject(this.#failureBeforeHead(error));
        return;
      }
      // Headers are already sent: the only honest signal left is to cut the client connection.
      if (!request.callerGone) {
        logger.warn(
          { cluster: this.#cluster.name, endpoint: this.#endpoint.address, code: errorCode(error) },
          'upstream response failed mid-stream',
        );
      }
      request.responseObserver?.end(false);
      if (this.#onDrain !== undefined) request.res.off('drain', this.#onDrain);
      request.res.destroy();
      this.#timing.latency.observe(Number(process.hrtime.bigint() - this.#started) / 1e9);
    }

    /** What the caller is answered when the exchange fails before the head: a connect failure may be retried. */
    #failureBeforeHead(error: Error): unknown {
      if (this.#request.callerGone) return error;
      const cluster = this.#cluster;
      const endpoint = this.#endpoint;
      const connectCode = connectPhaseCode(error);
      if (connectCode !== undefined) {
        endpoint.markDown(now());
        metrics.upstreamConnectFailures.inc({ role, cluster: cluster.name });
        logger.warn(
          { cluster: cluster.name, endpoint: endpoint.address, code: connectCode },
          'upstream connect failed; endpoint backing off',
        );
        return new UpstreamConnectError(cluster.name, endpoint.address, connectCode);
      }
      const code = errorCode(error);
      logger.warn(
        { cluster: cluster.name, endpoint: endpoint.address, code, error: errorFields(error) },
        'upstream request failed',
      );
      if (code === 'UND_ERR_HEADERS_TIMEOUT')
        return gatewayTimeout('upstream_timeout', `cluster "${cluster.name}" did not answer in time`);
      return badGateway('upstream_error', `cluster "${cluster.name}" failed before responding (${code})`);
    }
  }

  // The histogram series of each cluster, bound once rather than a label object per response.
  const timings = new Map<string, { latency: HistogramSeries; ttfb: HistogramSeries }>();
  function timingOf(cluster: string): { latency: HistogramSeries; ttfb: HistogramSeries } {
    let timing = timings.get(cluster);
    if (timing === undefined) {
      timing = {
        latency: metrics.upstreamLatency.labels(role, cluster),
        ttfb: metrics.timeToFirstByte.labels(role, cluster),
      };
      timings.set(cluster, timing);
    }
    return timing;
  }

  return {
    name: 'load_balancer',
    clusters,
    apply: forward,
    isClusterAvailable: (name) => clusters.get(name)?.available(now()) ?? false,
    async close(graceful) {
      const pools = [...[...clusters.values()].flatMap((c) => c.endpoints.map((e) => e.pool)), ...retired];
      await Promise.all(pools.map((pool) => (graceful ? pool.close() : pool.destroy()).catch(() => undefined)));
    },
  };
}
