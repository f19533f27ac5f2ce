/**
 * Renders one gateway's serving config (schemas/serving/): its entries (entries.ts) plus the signals endpoint of
 * every site they name. Pure; the publisher applies the result beside the overlay.
 */
import type {
  ServingConfigDocument,
  ServingConfigEntry,
  ServingSite,
} from '../../../schemas/generated/serving-config.ts';
import { buildServingDocument, servingConfigMapName } from '../../../schemas/serving/serving-config.ts';

export interface ServingRenderInput {
  readonly network: string;
  readonly gateway: { readonly name: string; readonly namespace: string };
  readonly localSite: string;
  readonly entries: readonly ServingConfigEntry[];
  /** host:port of each site's signals endpoint, as its site record advertises it (this site's: as bound or advertised). */
  readonly signalsAddresses: ReadonlyMap<string, string>;
  /** RFC 3339 time of the render: the overlay's, rendered from the same reconcile. */
  readonly generatedAt: string;
}

export interface RenderedServing {
  readonly document: ServingConfigDocument;
  readonly revision: string;
  readonly configMapName: string;
}

export function renderServing(input: ServingRenderInput): RenderedServing {
  const names = new Set([input.localSite, ...input.entries.map((e) => e.site)]);
  const sites: ServingSite[] = [...names].sort().map((site) => {
    const address = input.signalsAddresses.get(site);
    return address === undefined ? { site } : { site, signals_address: address };
  });
  const document = buildServingDocument(
    { gateway: input.gateway.name, namespace: input.gateway.namespace },
    { network: input.network, local_site: input.localSite, sites, entries: [...input.entries] },
    input.generatedAt,
  );
  return {
    document,
    revision: document.revision.value,
    configMapName: servingConfigMapName(input.network, input.gateway.name),
  };
}
