/**
 * The AgentToolProvider probe (seed 001/003): an MCP `tools/list` JSON-RPC call over streamable HTTP. The response
 * may be plain JSON or a text/event-stream carrying the JSON-RPC message; either way only tool names are kept.
 * A probe either succeeds (Available) or fails (Unavailable): there is no partial state to report.
 */
import { type ProbeFailure, type ProbeTls, probeHttp } from './http-probe.ts';

export interface McpProbeConfig {
  readonly endpoint: string;
  readonly tls?: ProbeTls;
  readonly bearerToken?: string;
  readonly timeoutMs: number;
}

export type McpProbeResult =
  | { readonly ok: true; readonly tools: readonly string[] }
  | { readonly ok: false; readonly reason: 'http_status' | 'invalid_response' | ProbeFailure; readonly detail: string };

export const MAX_TOOLS = 1024;
const MAX_TOOL_NAME_BYTES = 256;

export async function probeMcpTools(config: McpProbeConfig): Promise<McpProbeResult> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  };
  if (config.bearerToken !== undefined) headers['authorization'] = `Bearer ${config.bearerToken}`;
  const response = await probeHttp({
    url: new URL(config.endpoint),
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    timeoutMs: config.timeoutMs,
    maxBytes: 1024 * 1024,
    ...(config.tls ? { tls: config.tls } : {}),
  });
  if (!response.ok) return { ok: false, reason: response.failure, detail: response.detail };
  if (response.status < 200 || response.status > 299) {
    return { ok: false, reason: 'http_status', detail: `tools/list answered HTTP ${response.status}` };
  }
  const contentType = String(response.headers['content-type'] ?? '');
  const tools = parseToolsList(response.body.toString('utf8'), contentType.includes('text/event-stream'));
  return typeof tools === 'string' ? { ok: false, reason: 'invalid_response', detail: tools } : { ok: true, tools };
}

export function parseToolsList(text: string, eventStream: boolean): string[] | string {
  let message: unknown;
  try {
    message = eventStream ? lastEventData(text) : JSON.parse(text);
  } catch {
    return 'tools/list response is not JSON';
  }
  const error = (message as { error?: { code?: unknown } } | null)?.error;
  if (error !== undefined) return `tools/list returned a JSON-RPC error (code ${String(error?.code ?? 'unknown')})`;
  const tools = (message as { result?: { tools?: unknown } } | null)?.result?.tools;
  if (!Array.isArray(tools)) return 'tools/list response has no result.tools array';
  if (tools.length > MAX_TOOLS) return `tools/list lists ${tools.length} tools, limit is ${MAX_TOOLS}`;
  const names: string[] = [];
  for (const [index, tool] of tools.entries()) {
    const name = (tool as { name?: unknown } | null)?.name;
    if (typeof name !== 'string' || name.trim() === '' || Buffer.byteLength(name) > MAX_TOOL_NAME_BYTES || /[\u0000-\u001f\u007f]/.test(name)) {
      return `result.tools[${index}].name is missing, blank, too long or has control characters`;
    }
    names.push(name);
  }
  return [...new Set(names)];
}

function lastEventData(text: string): unknown {
  const data = text
    .split(/\r?\n\r?\n/)
    .map((event) => event.split(/\r?\n/).filter((line) => line.startsWith('data:')).map((line) => line.slice(5).trimStart()).join('\n'))
    .filter((d) => d !== '');
  const last = data.at(-1);
  if (last === undefined) throw new SyntaxError('no data event');
  return JSON.parse(last);
}
