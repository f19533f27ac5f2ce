/**
 * Whether the sites of a grid can reach each other as compiled: every site of a grid of several advertises a gossip
 * address that its public operator Service opens, a signals address when it serves peer signals, and a provider
 * gateway address that its gateway Service opens (peers probe it and their consumers call it); and every peer another site
 * verifies over Mutual TLS has a certificate pin (from the declaration's trust file or its own `trust`). Each stack
 * checks its own site's addresses; pins are checked per peer in the peer's words, so a grid of three sites reports a
 * missing pin once.
 */
import type { GridTrust } from '../schemas/generated/grid-trust.ts';
import { DEFAULT_SIGNALS_PORT } from './operator-listeners.ts';
import type { GridDeclaration, SiteDeclaration } from './grid-declaration.ts';
import { advertisedPortIssues, exposureIssues, type OperatorPortName } from './service-exposure.ts';
import type { SynthIssue } from './synth-error.ts';

export const DEFAULT_GOSSIP_PORT = 7946;
export const DEFAULT_PROVIDER_GATEWAY_PORT = 8443;

function operatorPortNames(site: SiteDeclaration, enrollmentOn: boolean): OperatorPortName[] {
  return [
    'gossip',
    ...(site.peerSignals === undefined ? [] : ['signals' as const]),
    ...(enrollmentOn ? ['enrollment' as const] : []),
  ];
}

function validPort(port: number): boolean {
  return Number.isInteger(port) && port >= 1 && port <= 65535;
}

/** The reachability problems of `site` in a grid with `peers` (none when it has no peers). */
export function reachabilityIssues(
  site: SiteDeclaration,
  peers: readonly SiteDeclaration[],
  enrollmentOn: boolean,
): SynthIssue[] {
  const issues: SynthIssue[] = [];
  const path = site.name;
  const service = site.gossipService;
  if (service !== undefined)
    issues.push(...exposureIssues(path, 'gossipService', service, operatorPortNames(site, enrollmentOn)));
  if (peers.length === 0) return issues;
  if (site.gossipAddress === undefined) {
    issues.push({
      path,
      field: 'gossipAddress',
      problem: `site ${site.name} has ${peers.length === 1 ? 'a peer' : `${peers.length} peers`}, but advertises no gossip address, so no other site can reach its SWIM port`,
      fix: 'set gossipAddress to the host:port of its gossipService (a load balancer name, or a node address with the node port)',
    });
  }
  if (service === undefined) {
    issues.push({
      path,
      field: 'gossipService',
      problem: `site ${site.name} has peers, but its operator's SWIM port is on a ClusterIP Service that only its own cluster reaches`,
      fix: "set gossipService { type: 'LoadBalancer' } (or NodePort with nodePorts.gossip); type: 'ClusterIP' only when the sites share one routed network",
    });
  } else if (issues.length === 0) {
    if (site.gossipAddress !== undefined)
      issues.push(
        ...advertisedPortIssues(
          path,
          'gossipAddress',
          site.gossipAddress,
          'gossipService',
          service,
          'gossip',
          DEFAULT_GOSSIP_PORT,
        ),
      );
    const signals = site.peerSignals;
    if (signals !== undefined) {
      if (signals.advertise === undefined) {
        issues.push({
          path,
          field: 'peerSignals.advertise',
          problem: `site ${site.name} serves peer signals to other sites but advertises no address for them, so peers cannot poll it`,
          fix: 'set peerSignals.advertise to the host:port of the signals port on its gossipService',
        });
      } else if (validPort(signals.port ?? DEFAULT_SIGNALS_PORT)) {
        // An invalid port is the operator's listener check to report; comparing the address with it would say it twice.
        issues.push(
          ...advertisedPortIssues(
            path,
            'peerSignals.advertise',
            signals.advertise,
            'gossipService',
            service,
            'signals',
            signals.port ?? DEFAULT_SIGNALS_PORT,
          ),
        );
      }
    }
  }
  const endpoint = site.gatewayEndpoint;
  // Every peer probes a declared gateway endpoint (the GridSite mTLS probe that makes a site Active), and peers'
  // consumers call it, so a ClusterIP one would leave the site Unreachable everywhere but at home.
  if (endpoint !== undefined && endpoint.tls?.mode === 'Mutual') {
    const exposure = site.providerGateway?.exposure;
    const port = site.providerGateway?.listenerPort ?? DEFAULT_PROVIDER_GATEWAY_PORT;
    if (exposure === undefined && site.providerGateway?.serviceType === undefined) {
      issues.push({
        path,
        field: 'providerGateway.exposure',
        problem: `other sites probe and call site ${site.name}'s provider gateway at ${endpoint.address}, but its Service is ClusterIP, which only its own cluster reaches`,
        fix: "set providerGateway.exposure { type: 'LoadBalancer' } (or NodePort with nodePorts.listener); type: 'ClusterIP' only when the sites share one routed network",
      });
    } else if (exposure !== undefined && validPort(port)) {
      issues.push(
        ...advertisedPortIssues(
          path,
          'gatewayEndpoint.address',
          endpoint.address,
          'providerGateway.exposure',
          exposure,
          'listener',
          port,
        ),
      );
    }
  }
  return issues;
}

/**
 * The pins a site's GridSite carries in every other site's manifests: its own `trust` when declared, else its
 * provider gateway pins in the trust file.
 */
export function peerTrust(peer: SiteDeclaration, trust: GridTrust | undefined): SiteDeclaration['trust'] {
  if (peer.trust !== undefined) return peer.trust;
  const pins = trust?.sites[peer.name]?.gatewayPins;
  return pins === undefined ? undefined : { canonicalFingerprints: [...pins] };
}

/** The trust problems of a peer that `site` verifies: no pin for a Mutual endpoint, or two disagreeing sources. */
export function peerTrustIssues(peer: SiteDeclaration, trust: GridTrust | undefined): SynthIssue[] {
  const endpoint = peer.gatewayEndpoint;
  if (endpoint === undefined || endpoint.tls?.mode !== 'Mutual') return [];
  const fromFile = trust?.sites[peer.name]?.gatewayPins;
  if (peer.trust !== undefined && fromFile !== undefined) {
    const declared = peer.trust.canonicalFingerprints ?? [];
    if (declared.length !== fromFile.length || declared.some((pin, i) => pin !== fromFile[i])) {
      return [
        {
          path: peer.name,
          field: 'trust',
          problem: `site ${peer.name} declares pins of its own that differ from its pins in the declaration's trust file`,
          fix: "drop the site's trust (the trust file is kept by `agn pki`), or remove the site from the trust file",
        },
      ];
    }
    return [];
  }
  if (peerTrust(peer, trust) !== undefined) return [];
  return [
    {
      path: peer.name,
      field: 'trust',
      problem: `no certificate pin for site ${peer.name}'s provider gateway (${endpoint.address}), so the other sites keep it Connecting (TrustMaterialMissing) and never route to it`,
      fix:
        trust === undefined
          ? "run `agn pki init` and pass the trust file it writes as the declaration's trust: readGridTrust(new URL('./grid-trust.json', import.meta.url))"
          : `run \`agn pki init\` again: it issues ${peer.name}'s certificates and adds its pins to the trust file`,
    },
  ];
}

/** Grid-wide trust problems: a trust file of another network. */
export function gridTrustIssues(declaration: GridDeclaration): SynthIssue[] {
  const trust = declaration.trust;
  if (trust === undefined || trust.network === declaration.network.name) return [];
  return [
    {
      path: 'declaration',
      field: 'trust.network',
      problem: `the trust file is for network ${trust.network}, not ${declaration.network.name}`,
      fix: `pass the trust file of network ${declaration.network.name}, or run \`agn pki init\` for it`,
    },
  ];
}
