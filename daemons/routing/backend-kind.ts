/**
 * Which routing category an InferenceProvider belongs to, from the spellings in use. AGN recognizes the categories
 * `local | remote | cloud_managed | api_provider`, and an unrecognized value "is not converted into a normal scoring
 * candidate"; an external HTTPS API is also written `providerKind: External`, `backendKind: OpenAI`
 * (test/fixtures/crds/valid/inferenceprovider-seed000-external.yaml). Both are the same provider category, so both
 * must route: a spelling is resolved here once, and a provider nothing resolves is refused with a reason its status
 * shows, never dropped quietly.
 */
import { RECOGNIZED_BACKEND_KINDS } from './model.ts';

export type BackendCategory = (typeof RECOGNIZED_BACKEND_KINDS)[number];

export type BackendKindResolution =
  | { readonly ok: true; readonly category: BackendCategory }
  | { readonly ok: false; readonly message: string };

/** Case and separators do not matter: `api_provider`, `ApiProvider` and `api-provider` are one spelling. */
function fold(value: string): string {
  return value.toLowerCase().replace(/[\s_.-]/g, '');
}

const BY_FOLDED: ReadonlyMap<string, BackendCategory> = new Map<string, BackendCategory>([
  ['local', 'local'],
  ['remote', 'remote'],
  ['cloudmanaged', 'cloud_managed'],
  ['apiprovider', 'api_provider'],
  // In-cluster providers are written providerKind self_hosted with backendKind local; self_hosted as a backendKind
  // says the same.
  ['selfhosted', 'local'],
  // An external HTTPS API names its vendor ("External APIs (OpenAI, Anthropic, Bedrock)"), e.g. backendKind: OpenAI.
  // The vendor names of the providerKind list: OpenAI and Anthropic are third-party APIs, Bedrock and Vertex are
  // cloud-managed services ("cloud_managed is distinct ... operational ownership": someone else runs them).
  ['openai', 'api_provider'],
  ['anthropic', 'api_provider'],
  ['bedrock', 'cloud_managed'],
  ['vertex', 'cloud_managed'],
]);

/**
 * The category of a provider. backendKind decides when it names one; otherwise providerKind External (an external
 * HTTPS API) means api_provider. Anything else is refused with a message naming both fields.
 */
export function resolveBackendKind(providerKind: string | undefined, backendKind: string): BackendKindResolution {
  const category = BY_FOLDED.get(fold(backendKind));
  if (category !== undefined) return { ok: true, category };
  if (providerKind !== undefined && fold(providerKind) === 'external') return { ok: true, category: 'api_provider' };
  return {
    ok: false,
    message:
      `spec.backendKind "${backendKind}" is not a routing category (${RECOGNIZED_BACKEND_KINDS.join(', ')}, or a vendor: OpenAI, Anthropic, Bedrock, Vertex)` +
      (providerKind === undefined ? '' : ` and spec.providerKind "${providerKind}" is not External`),
  };
}

/**
 * API providers and cloud-managed services are the fallback of self-hosted pools in the same tier (docs/contract.md
 * §2.5): "Scoring normally places self-hosted candidates ahead of API-provider candidates, so API providers are used
 * as fallback or explicit lower-priority routes".
 */
export function isExternalCategory(category: BackendCategory): boolean {
  return category === 'api_provider' || category === 'cloud_managed';
}
