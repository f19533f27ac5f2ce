// What agent traffic the gateway carried: JSON-RPC messages per protocol method, and MCP tool calls per tool. Every
// label is bounded: servers and tools come from the config and the overlay (a tool the overlay does not list is
// refused before it is counted), methods from the protocol's own list, tenants from the caller keys file.
import { Counter } from 'prom-client';
import type { Registry } from 'prom-client';

export interface AgentMetrics {
  readonly mcpMessages: Counter<'server' | 'method' | 'site'>;
  readonly mcpToolCalls: Counter<'server' | 'tool' | 'site' | 'tenant'>;
  readonly mcpRefused: Counter<'server' | 'reason'>;
  readonly a2aMessages: Counter<'agent' | 'method' | 'site' | 'tenant'>;
}

const byRegistry = new WeakMap<Registry, AgentMetrics>();

/** One set per registry: the listeners of a gateway share it. */
export function agentMetrics(registry: Registry): AgentMetrics {
  let metrics = byRegistry.get(registry);
  if (metrics === undefined) {
    metrics = {
      mcpMessages: new Counter({
        name: 'grid_gateway_mcp_messages_total',
        help: 'MCP JSON-RPC messages routed, by server, method and site.',
        labelNames: ['server', 'method', 'site'],
        registers: [registry],
      }),
      mcpToolCalls: new Counter({
        name: 'grid_gateway_mcp_tool_calls_total',
        help: 'MCP tools/call requests routed, by server, tool, site and tenant.',
        labelNames: ['server', 'tool', 'site', 'tenant'],
        registers: [registry],
      }),
      mcpRefused: new Counter({
        name: 'grid_gateway_mcp_refused_total',
        help: 'MCP requests the gateway answered itself, by server and reason.',
        labelNames: ['server', 'reason'],
        registers: [registry],
      }),
      a2aMessages: new Counter({
        name: 'grid_gateway_a2a_messages_total',
        help: 'A2A JSON-RPC messages routed, by agent, method, site and tenant.',
        labelNames: ['agent', 'method', 'site', 'tenant'],
        registers: [registry],
      }),
    };
    byRegistry.set(registry, metrics);
  }
  return metrics;
}
