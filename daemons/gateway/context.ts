// What one request carries through the filter pipeline. Filters read and edit `headers` (the headers that will
// go upstream), set the model, the target cluster and the credential reference; the load balancer forwards.
import type { IncomingMessage } from 'node:http';
import type { GatewayResponse } from './response.ts';
import type { LoadCell } from './routing/candidate-load.ts';
import type { RoutingSnapshot } from './routing/snapshot.ts';
import type { RequestTrace } from './tracing/request-trace.ts';
import type { CredentialRef } from './credential-ref.ts';

// Kept importable from here, where the filters have always found them; defined beside what they are.
export { credentialRef, type CredentialRef } from './credential-ref.ts';
export * from './hop-headers.ts';

/** Identity of the TLS peer, computed once per connection. */
export interface PeerIdentity {
  /** SHA-256 of the leaf certificate DER, 64 lowercase hex. */
  readonly certDigest: string;
  readonly organizations: readonly string[];
  /** Serial number, lowercase hex without separators. */
  readonly serialNumber: string;
}

export interface GatewayRequest {
  readonly req: IncomingMessage;
  readonly res: GatewayResponse;
  readonly method: string;
  /** Path without the query string. */
  readonly path: string;
  /** Path and query as forwarded upstream. */
  target: string;
  /** Headers to send upstream (lowercase names); filters strip and set here. */
  readonly headers: Map<string, string | string[]>;
  readonly receivedAtNs: bigint;
  /**
   * This request's id: answered as x-request-id on every response and sent on a provider hop (docs/contract.md §3.1).
   */
  readonly requestId: string;
  /** True once the caller went away before its response was finished. */
  callerGone: boolean;
  /**
   * The upstream exchange running for this request, if any: told when the caller goes away, so it aborts the upstream
   * request. A field the server calls rather than an AbortSignal: no controller, event target or listener per request.
   */
  upstream: CallerGoneListener | undefined;
  readonly peer: PeerIdentity | null;
  body: Buffer | null;
  model: string | undefined;
  /** Upstream cluster chosen by the route filter. */
  cluster: string | undefined;
  credential: CredentialRef | undefined;
  snapshot: RoutingSnapshot | undefined;
  /** Site of the candidate the route filter selected (answered to the caller as x-agn-routed-site). */
  routedSite: string | undefined;
  /** Set by usage_meter: sees the upstream response as the load balancer streams it. */
  responseObserver: ResponseObserver | undefined;
  /** Tenant of the authenticated caller (caller_auth); undefined when the listener does not authenticate callers. */
  tenant: string | undefined;
  /** Public id of the caller's key (caller_auth), for per-key limits; never logged. */
  callerKeyId: string | undefined;
  /** Bounded label values for metrics. */
  labels: { model: string; cluster: string };
  /**
   * Set by the route filter when a connect failure may move the request to another candidate: switches the
   * request's cluster, headers and credential and returns true, or returns false when there is none. One function
   * per filter, with the request's own part in `failoverState`: a closure made per request and kept on it makes every
   * request's objects outlive the young generation (10-24 ms scavenges at 1000 req/s; `npm run bench:gateway-gc`).
   */
  failover: ((request: GatewayRequest) => boolean) | undefined;
  /** What the route filter's `failover` needs to decide again; opaque to everything else. */
  failoverState: unknown;
  /**
   * The in-flight count this request adds to (local_load, routing/candidate-load.ts): set by the route filter, moved
   * by its failover, ended by the server's close handler (endLoad). A field, not a close listener per request.
   */
  load: LoadCell | undefined;
  /**
   * The endpoint (index in its cluster) this request must reach, set by a route that pins a session or a task to
   * the backend replica holding it; the load balancer then uses that endpoint and no other.
   */
  pinnedEndpoint: number | undefined;
  /** The endpoint (index in its cluster) the load balancer sent the request to, for observers that pin to it. */
  endpointIndex: number | undefined;
  /** This request's spans when tracing is on (tracing/tracing.ts); undefined otherwise, and every hook is skipped. */
  readonly trace: RequestTrace | undefined;
}

export interface CallerGoneListener {
  callerGone(): void;
}

/**
 * Watches an upstream response on its way to the caller. `push` returns the bytes to write for a chunk (itself,
 * unless the observer removes something it added to the request); `end` runs once: complete=true at the end of the
 * body (its return value is written last), false when the response broke off or the caller left.
 */
export interface ResponseObserver {
  /** `headers` are the ones about to be written: an observer may rewrite one (mcp_route's session id). */
  start(status: number, headers: Record<string, string | string[]>): void;
  push(chunk: Buffer): Buffer;
  end(complete: boolean): Buffer;
}

export interface Filter {
  readonly name: string;
  /** Throws a GatewayError to answer instead of the upstream. */
  apply(request: GatewayRequest): void | Promise<void>;
}

export function singleHeader(request: GatewayRequest, name: string): string | undefined {
  const value = request.req.headers[name];
  if (Array.isArray(value)) return value.length === 1 ? value[0] : undefined;
  return value;
}

/**
 * Two observers on one response: the upstream's bytes go through `first` (the one that sees them as sent, e.g.
 * usage_meter) and then `second` (one that rewrites what the caller gets, e.g. grid_site_route's id tags).
 */
export function chainObservers(first: ResponseObserver, second: ResponseObserver): ResponseObserver {
  return {
    start(status, headers) {
      first.start(status, headers);
      second.start(status, headers);
    },
    push: (chunk) => second.push(first.push(chunk)),
    end(complete) {
      const tail = first.end(complete);
      const rewritten = tail.length > 0 ? second.push(tail) : tail;
      const rest = second.end(complete);
      return rest.length === 0 ? rewritten : Buffer.concat([rewritten, rest]);
    },
  };
}
