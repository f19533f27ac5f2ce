// JSON-RPC 2.0 as MCP and A2A carry it over HTTP: the gateway reads a request body only far enough to know which
// methods it holds (for metrics, tool authorization and task affinity) and answers its own refusals as JSON-RPC
// errors, so an SDK client shows the gateway's reason the way it shows a server's.
import { isUtf8 } from 'node:buffer';
import { GatewayError } from '../errors.ts';

/** JSON-RPC's own codes, and the -32001 the MCP SDK's servers answer for an unknown session. */
export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;
export const INVALID_PARAMS = -32602;
export const SESSION_NOT_FOUND = -32001;

/** At most this many messages in one batch (the 2025-03-26 MCP revision allows batches; later ones do not). */
export const MAX_BATCH = 64;

export type JsonRpcId = string | number | null;

export interface JsonRpcMessage {
  /** undefined for a response or a notification without a method. */
  readonly method: string | undefined;
  readonly id: JsonRpcId | undefined;
  readonly params: Record<string, unknown> | undefined;
}

export function jsonRpcErrorBody(id: JsonRpcId, code: number, message: string): string {
  return JSON.stringify({ jsonrpc: '2.0', id, error: { code, message } });
}

/** A refusal answered with a JSON-RPC error body (and the gateway's code in the error's message). */
export function jsonRpcError(
  status: number,
  code: string,
  rpcCode: number,
  message: string,
  id: JsonRpcId = null,
  headers: Record<string, string> = {},
): GatewayError {
  return new GatewayError(
    status,
    code,
    status >= 500 ? 'service_unavailable' : status === 404 ? 'not_found_error' : 'invalid_request_error',
    message,
    headers,
    jsonRpcErrorBody(id, rpcCode, message),
  );
}

/**
 * The messages of a POST body: one object or a batch. Anything else is a -32700 (not JSON) or -32600 (not
 * JSON-RPC) answered by the gateway with HTTP 400, never forwarded.
 */
export function parseMessages(body: Buffer): JsonRpcMessage[] {
  if (!isUtf8(body))
    throw jsonRpcError(400, 'invalid_json', PARSE_ERROR, 'Parse error: the request body is not valid UTF-8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch (error) {
    throw jsonRpcError(400, 'invalid_json', PARSE_ERROR, `Parse error: ${(error as Error).message.slice(0, 200)}`);
  }
  const items = Array.isArray(parsed) ? parsed : [parsed];
  if (items.length === 0)
    throw jsonRpcError(400, 'invalid_jsonrpc', INVALID_REQUEST, 'Invalid Request: an empty batch');
  if (items.length > MAX_BATCH)
    throw jsonRpcError(
      400,
      'invalid_jsonrpc',
      INVALID_REQUEST,
      `Invalid Request: a batch of ${items.length} messages (at most ${MAX_BATCH})`,
    );
  return items.map((item, i) => {
    const where = Array.isArray(parsed) ? `message ${i}` : 'the message';
    if (typeof item !== 'object' || item === null || Array.isArray(item))
      throw jsonRpcError(400, 'invalid_jsonrpc', INVALID_REQUEST, `Invalid Request: ${where} is not a JSON object`);
    const message = item as Record<string, unknown>;
    if (message['jsonrpc'] !== '2.0')
      throw jsonRpcError(
        400,
        'invalid_jsonrpc',
        INVALID_REQUEST,
        `Invalid Request: ${where} has no "jsonrpc": "2.0"`,
        idOf(message),
      );
    const method = message['method'];
    if (method !== undefined && (typeof method !== 'string' || method.length === 0 || method.length > 256)) {
      throw jsonRpcError(
        400,
        'invalid_jsonrpc',
        INVALID_REQUEST,
        `Invalid Request: ${where} has a "method" that is not a string of 1-256 characters`,
        idOf(message),
      );
    }
    if (method === undefined && !('result' in message) && !('error' in message)) {
      throw jsonRpcError(
        400,
        'invalid_jsonrpc',
        INVALID_REQUEST,
        `Invalid Request: ${where} is neither a request, a notification nor a response`,
        idOf(message),
      );
    }
    const params = message['params'];
    return {
      method,
      id: idOf(message),
      params:
        typeof params === 'object' && params !== null && !Array.isArray(params)
          ? (params as Record<string, unknown>)
          : undefined,
    };
  });
}

function idOf(message: Record<string, unknown>): JsonRpcId | undefined {
  const id = message['id'];
  return typeof id === 'string' || typeof id === 'number' || id === null ? id : undefined;
}

/**
 * A bounded label for a method name: one of `known`, else "other" (a method name is caller-chosen text, and every
 * distinct label value is a series kept for the life of the process).
 */
export function methodLabel(method: string | undefined, known: ReadonlySet<string>): string {
  if (method === undefined) return 'response';
  return known.has(method) ? method : 'other';
}
