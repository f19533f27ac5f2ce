import { stableId } from '../schemas/fnv1a.ts';
import type { ProviderDeclaration, SiteDeclaration } from './grid-declaration.ts';
import { DEFAULT_NAMESPACE } from './labels.ts';
import type { CredentialRef } from './provider-gateway-config.ts';
import type { SynthIssue } from './synth-error.ts';

/**
 * The candidates a grid declaration can put into overlays, computed at synth time exactly as the operator will:
 * stable_id = FNV-1a of "{kind}/{name}/{site}/{cluster}" (docs/contract.md §2.2). Provider routes carry these ids, so
 * no post-install step has to read them back from an overlay.
 */

/** The overlay `kind` of an inference model candidate. */
export const INFERENCE_MODEL = 'inference_model';

export interface Candidate {
  readonly site: string;
  readonly provider: string;
  readonly model: string;
  /** The candidate cluster: spec.routingClusterRef, else the provider name. */
  readonly cluster: string;
  readonly stableId: string;
}

export function siteNamespace(site: SiteDeclaration): string {
  return site.namespace ?? DEFAULT_NAMESPACE;
}

export function candidateCluster(provider: ProviderDeclaration): string {
  return provider.spec.routingClusterRef ?? provider.name;
}

export function providerCandidates(site: SiteDeclaration, provider: ProviderDeclaration): Candidate[] {
  const cluster = candidateCluster(provider);
  return (provider.spec.models ?? []).map((model) => ({
    site: site.name,
    provider: provider.name,
    model: model.name,
    cluster,
    stableId: stableId(INFERENCE_MODEL, model.name, site.name, cluster),
  }));
}

/** The bearer credential reference of a provider, if the gateway must inject one (key defaults to `token`). */
export function providerCredential(provider: ProviderDeclaration): CredentialRef | undefined {
  const auth = provider.spec.auth;
  if (auth === undefined || auth.strategy !== 'bearer_token' || auth.secretRef === undefined) return undefined;
  if (auth.credentialsManagedExternally === true || auth.manual === true) return undefined;
  return { name: auth.secretRef.name, namespace: auth.secretRef.namespace, key: auth.secretRef.key ?? 'token' };
}

/**
 * Checks the grid-wide candidate universe: a stable_id shared by two different candidates (an FNV-32 collision,
 * the provider gateway could not tell them apart), the same candidate declared twice, and a cluster name used by
 * two sites (a consumer maps each cluster to exactly one provider gateway).
 */
export function candidateIssues(
  sites: readonly SiteDeclaration[],
  pathOf: (site: SiteDeclaration, provider: ProviderDeclaration) => string,
): SynthIssue[] {
  const issues: SynthIssue[] = [];
  const byId = new Map<string, { candidate: Candidate; path: string }>();
  const clusterSite = new Map<string, { site: string; path: string }>();
  for (const site of sites) {
    for (const provider of site.providers ?? []) {
      const path = pathOf(site, provider);
      const cluster = candidateCluster(provider);
      const owner = clusterSite.get(cluster);
      if (owner !== undefined && owner.site !== site.name) {
        issues.push({
          path,
          field: provider.spec.routingClusterRef === undefined ? 'name' : 'spec.routingClusterRef',
          problem: `cluster ${cluster} is also served by site ${owner.site} (${owner.path}); a consumer maps a cluster to one provider gateway`,
          fix: `give this provider a distinct name or spec.routingClusterRef`,
        });
      } else if (owner === undefined) {
        clusterSite.set(cluster, { site: site.name, path });
      }
      for (const candidate of providerCandidates(site, provider)) {
        const seen = byId.get(candidate.stableId);
        if (seen === undefined) {
          byId.set(candidate.stableId, { candidate, path });
          continue;
        }
        const same =
          seen.candidate.model === candidate.model &&
          seen.candidate.site === candidate.site &&
          seen.candidate.cluster === candidate.cluster;
        // A model listed twice in one provider is the InferenceProvider schema's duplicate-entry error; report it once, there.
        if (same && seen.path === path) continue;
        issues.push(
          same
            ? {
                path,
                field: `spec.models[name=${candidate.model}]`,
                problem: `model ${candidate.model} on cluster ${candidate.cluster} of site ${candidate.site} is already declared by ${seen.path}`,
                fix: 'serve the model from one provider per cluster, or give one provider its own spec.routingClusterRef',
              }
            : {
                path,
                field: `spec.models[name=${candidate.model}]`,
                problem: `stable_id ${candidate.stableId} of ${INFERENCE_MODEL}/${candidate.model}/${candidate.site}/${candidate.cluster} collides with ${INFERENCE_MODEL}/${seen.candidate.model}/${seen.candidate.site}/${seen.candidate.cluster} (${seen.path})`,
                fix: 'rename the model, or set spec.routingClusterRef to a different cluster name, so the FNV-1a ids differ',
              },
        );
      }
    }
  }
  return issues;
}
