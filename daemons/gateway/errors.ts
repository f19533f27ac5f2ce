// Every answer the gateway gives instead of the upstream's: a stable code, an HTTP status, and an OpenAI-style
// JSON body ({"error":{"message","type","code"}}) so SDK clients show the reason. Messages never carry secrets.

export type GatewayErrorType =
  | 'invalid_request_error'
  | 'not_found_error'
  | 'permission_error'
  | 'service_unavailable'
  | 'upstream_error'
  | 'timeout_error'
  | 'insufficient_quota'
  | 'requests'
  | 'tokens';

export class GatewayError extends Error {
  readonly status: number;
  readonly code: string;
  readonly type: GatewayErrorType;
  readonly headers: Readonly<Record<string, string>>;
  /** A body in another protocol's error shape (a JSON-RPC error for MCP and A2A callers), instead of the OpenAI one. */
  readonly body: string | undefined;
  constructor(
    status: number,
    code: string,
    type: GatewayErrorType,
    message: string,
    headers: Record<string, string> = {},
    body?: string,
  ) {
    super(message);
    this.body = body;
    this.name = 'GatewayError';
    this.status = status;
    this.code = code;
    this.type = type;
    this.headers = headers;
  }
}

export const badRequest = (code: string, message: string): GatewayError =>
  new GatewayError(400, code, 'invalid_request_error', message);
/** OpenAI's shape for a missing or refused API key: 401, invalid_request_error (SDKs raise AuthenticationError). */
export const unauthorized = (code: string, message: string): GatewayError =>
  new GatewayError(401, code, 'invalid_request_error', message, { 'www-authenticate': 'Bearer' });
export const forbidden = (code: string, message: string): GatewayError =>
  new GatewayError(403, code, 'permission_error', message);
export const notFound = (code: string, message: string): GatewayError =>
  new GatewayError(404, code, 'not_found_error', message);
export const unavailable = (code: string, message: string, retryAfterSeconds = 1): GatewayError =>
  new GatewayError(503, code, 'service_unavailable', message, { 'retry-after': String(retryAfterSeconds) });
/** 405 with the Allow header naming the methods the path takes. */
export const methodNotAllowed = (allow: string): GatewayError =>
  new GatewayError(405, 'method_not_allowed', 'invalid_request_error', `method not allowed; use ${allow}`, { allow });
export const badGateway = (code: string, message: string): GatewayError =>
  new GatewayError(502, code, 'upstream_error', message);
export const gatewayTimeout = (code: string, message: string): GatewayError =>
  new GatewayError(504, code, 'timeout_error', message);

/**
 * Set by a gateway on its own 502/503 when the request reached no upstream (none could be connected to, or every
 * endpoint was backing off): a consumer gateway whose provider hop answers with it may fail the request over, as after
 * its own connect failure. Never taken from an upstream's answer (the load balancer drops it there).
 */
export const NOT_DELIVERED_HEADER = 'x-grid-not-delivered';

/** 502: no endpoint of the cluster could be connected to; the request reached no upstream. */
export const upstreamUnreachable = (message: string): GatewayError =>
  new GatewayError(502, 'upstream_unreachable', 'upstream_error', message, { [NOT_DELIVERED_HEADER]: '1' });

/** 503 for a request that was sent nowhere (no configured or available endpoint), with Retry-After. */
export const unavailableNotDelivered = (code: string, message: string): GatewayError =>
  new GatewayError(503, code, 'service_unavailable', message, { 'retry-after': '1', [NOT_DELIVERED_HEADER]: '1' });

/**
 * A failure to reach an upstream before any request byte was sent (refused, connect timeout, TLS handshake):
 * the only failure a request may be retried after, because the upstream cannot have acted on it.
 */
export class UpstreamConnectError extends Error {
  readonly cluster: string;
  readonly endpoint: string;
  readonly causeCode: string;
  constructor(cluster: string, endpoint: string, causeCode: string) {
    super(`could not connect to cluster "${cluster}" endpoint ${endpoint} (${causeCode})`);
    this.name = 'UpstreamConnectError';
    this.cluster = cluster;
    this.endpoint = endpoint;
    this.causeCode = causeCode;
  }
}

export function errorBody(error: GatewayError): string {
  if (error.body !== undefined) return error.body;
  return JSON.stringify({ error: { message: error.message, type: error.type, code: error.code } });
}
