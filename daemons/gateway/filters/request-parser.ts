// The request parser (json_body_field / openai_responses_format): reads the body up to a bound, finds the
// model of chat completions, completions, embeddings and Responses requests, and promotes it into the model
// header the route filters read. Everything past the body (the response) is streamed, never buffered. The body is
// read once per request (request.body) and scanned, not parsed: json-scan.ts bounds the cost by size and depth.
import { isUtf8 } from 'node:buffer';
import { GatewayError, badRequest } from '../errors.ts';
import type { Filter, GatewayRequest } from '../context.ts';
import { readBoundedBody } from '../../shared/http-body.ts';
import { JsonScanError, scanTopLevelField } from './json-scan.ts';
import type { ScannedField } from './json-scan.ts';

export const DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024;
export const DEFAULT_MODEL_HEADER = 'x-gateway-model-name';
export const MAX_MODEL_BYTES = 256;

/** Endpoints whose POST body names the model (the Responses API puts it at the top level too). */
const MODEL_BODY_PATHS = new Set(['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/responses']);

// C0 controls and DEL: a model with them could never be a header value (header injection).
const CONTROL = /[\u0000-\u001f\u007f]/;

function unsupportedMediaType(path: string): GatewayError {
  return new GatewayError(
    415,
    'unsupported_media_type',
    'invalid_request_error',
    `request body of ${path} must be sent as content-type application/json`,
  );
}

/**
 * `application/json` with or without parameters (charset), or no content-type at all (the body is then read as
 * JSON, as the backend does); a body declared as anything else (text/plain, a form) is not a JSON body.
 */
function isJsonContentType(value: string | string[] | undefined): boolean {
  if (value === undefined) return true;
  if (typeof value !== 'string') return false;
  const semi = value.indexOf(';');
  return (semi === -1 ? value : value.slice(0, semi)).trim().toLowerCase() === 'application/json';
}

export function payloadTooLarge(maxBytes: number): GatewayError {
  return new GatewayError(413, 'request_too_large', 'invalid_request_error', `request body exceeds ${maxBytes} bytes`, {
    connection: 'close',
  });
}

/** docs/contract.md §3.1: blank, non-UTF-8 or over 256 bytes is a 400. Returns the model or throws. */
export function checkModel(model: string, source: string): string {
  if (model.trim() === '') throw badRequest('invalid_model', `${source} is blank`);
  if (Buffer.byteLength(model, 'utf8') > MAX_MODEL_BYTES)
    throw badRequest('invalid_model', `${source} is longer than ${MAX_MODEL_BYTES} bytes`);
  if (CONTROL.test(model)) throw badRequest('invalid_model', `${source} contains control characters`);
  if (model.isWellFormed !== undefined && !model.isWellFormed())
    throw badRequest('invalid_model', `${source} is not valid UTF-8`);
  return model;
}

export interface RequestParserOptions {
  /** Body field holding the model (json_body_field.field); "model" by default. */
  field: string;
  /** Header the model is promoted into (json_body_field.header, or the route filter's model_header). */
  header: string;
  maxBodyBytes: number;
}

export function createRequestParser(options: RequestParserOptions): Filter {
  const header = options.header.toLowerCase();
  return {
    name: 'request_parser',
    apply(request: GatewayRequest): void | Promise<void> {
      const jsonBody = request.method === 'POST' && MODEL_BODY_PATHS.has(request.path);
      // Checked before the body is read: a text/plain or form body is never buffered, scanned or routed.
      if (jsonBody && !isJsonContentType(request.req.headers['content-type'])) throw unsupportedMediaType(request.path);
      if (request.body !== null) return promoteModel(request, jsonBody);
      // Not an async function: one Promise for the body read and one reaction, no suspended frame per request.
      return readBoundedBody(request.req, options.maxBodyBytes, payloadTooLarge).then((body) => {
        request.body = body;
        promoteModel(request, jsonBody);
      });
    },
  };

  /** Finds the model (body field, or the header on body-less calls) and promotes it into the model header. */
  function promoteModel(request: GatewayRequest, jsonBody: boolean): void {
    let model: string | undefined;
    if (jsonBody) {
      model = modelFromBody(request.body!, options.field, request.path);
    } else {
      // Body-less calls (Responses sub-resources such as GET /v1/responses/{id}) may name the model in the header.
      const value = request.req.headers[header];
      if (typeof value === 'string') model = checkModel(value, `header ${header}`);
    }
    request.headers.delete(header);
    if (model !== undefined) {
      request.model = model;
      request.headers.set(header, model);
    }
  }
}

function modelFromBody(body: Buffer, field: string, path: string): string | undefined {
  if (!isUtf8(body)) throw badRequest('invalid_body', 'request body is not valid UTF-8');
  let scanned: ScannedField;
  try {
    // A model longer than MAX_MODEL_BYTES is refused below; 6 raw bytes per character covers \uXXXX escapes.
    scanned = scanTopLevelField(body, field, MAX_MODEL_BYTES * 6);
  } catch (error) {
    if (!(error instanceof JsonScanError)) throw error;
    if (error.problem === 'not_object')
      throw badRequest('invalid_json', `request body of ${path} must be a JSON object`);
    throw badRequest('invalid_json', `request body of ${path} is not valid JSON: ${error.message}`);
  }
  if (scanned.kind === 'absent') return undefined;
  if (scanned.kind === 'other') throw badRequest('invalid_model', `body field "${field}" must be a string`);
  if (scanned.value === undefined)
    throw badRequest('invalid_model', `body field "${field}" is longer than ${MAX_MODEL_BYTES} bytes`);
  return checkModel(scanned.value, `body field "${field}"`);
}
