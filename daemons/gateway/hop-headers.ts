// The header names of the provider-hop contract and the caller's answer, and the one pass that strips client-sent hop
// context: what the filters, the load balancer and the response class share, with no other dependency.

/** Header names of the provider-hop contract (docs/contract.md §3.1, §3.2). */
export const ROUTING_CANDIDATE_HEADER = 'x-ai-routing-candidate';
export const ROUTING_REQUEST_ID_HEADER = 'x-ai-routing-request-id';
export const ROUTING_REVISION_HEADER = 'x-ai-routing-revision';
export const PROVIDER_REQUEST_ID_HEADER = 'x-ai-provider-request-id';
export const PROVIDER_ATTRIBUTION_HEADER = 'x-ai-provider-attribution';
export const PROVIDER_REVISION_HEADER = 'x-ai-provider-routing-revision';
/** Response headers for the caller: the gateway's request id (the openai SDK's `_request_id`) and the routed site. */
export const RESPONSE_REQUEST_ID_HEADER = 'x-request-id';
export const RESPONSE_UPSTREAM_REQUEST_ID_HEADER = 'x-upstream-request-id';
export const RESPONSE_ROUTED_SITE_HEADER = 'x-agn-routed-site';

export function stripPrefixedHeaders(headers: Map<string, string | string[]>, prefix: string): void {
  // Deleting the entry being visited is safe in a Map iteration: no copy of the keys.
  for (const name of headers.keys()) if (name.startsWith(prefix)) headers.delete(name);
}

/** Removes every x-ai-routing-* and x-ai-provider-* header in one pass (client-sent hop context is never trusted). */
export function stripHopHeaders(headers: Map<string, string | string[]>): void {
  for (const name of headers.keys()) {
    if (name.startsWith('x-ai-') && (name.startsWith('x-ai-routing-') || name.startsWith('x-ai-provider-')))
      headers.delete(name);
  }
}
