// floor-proxy.ts's mutual-TLS arguments for the floor of the hop, as bench:gateway and bench:gateway-instructions run
// it: the provider side listens with the provider's certificate and asks for a client certificate from the grid CA;
// the edge side forwards with the edge's certificate and the provider's SNI, as the consumer gateway's hop pool does.
import { PROVIDER_SNI, type Pki } from '../gateway/helpers.ts';

export const floorListenTls = (pki: Pki): string[] => [
  '--listen-tls',
  `${pki.providerCertPath},${pki.providerKeyPath},${pki.caPath}`,
];

export const floorUpstreamTls = (pki: Pki): string[] => [
  '--upstream-tls',
  `${pki.caPath},${pki.edgeCertPath},${pki.edgeKeyPath},${PROVIDER_SNI}`,
];
