// peer_identity_trust (docs/contract.md §3.2): the first, unconditional filter of a provider pipeline. A request is let
// through only when the verified client certificate matches a trusted_peers entry on every field that entry sets.
import type { PeerIdentityTrustFilter, TrustedPeer } from '../../../schemas/generated/gateway-config.ts';
import { forbidden } from '../errors.ts';
import type { Filter, GatewayRequest, PeerIdentity } from '../context.ts';

export const normalizeSerial = (serial: string): string =>
  serial
    .replace(/:/g, '')
    .toLowerCase()
    .replace(/^0+(?=.)/, '');

export function peerMatches(peer: PeerIdentity, entry: TrustedPeer): boolean {
  if (entry.cert_digest !== undefined && entry.cert_digest !== peer.certDigest) return false;
  if (entry.organization !== undefined && !peer.organizations.includes(entry.organization)) return false;
  if (entry.serial_number !== undefined && normalizeSerial(entry.serial_number) !== normalizeSerial(peer.serialNumber))
    return false;
  return entry.cert_digest !== undefined || entry.organization !== undefined || entry.serial_number !== undefined;
}

export function createPeerIdentityTrust(config: PeerIdentityTrustFilter): Filter {
  return {
    name: 'peer_identity_trust',
    apply(request: GatewayRequest): void {
      const peer = request.peer;
      if (peer === null) throw forbidden('peer_not_authenticated', 'a verified client certificate is required');
      if (!config.trusted_peers.some((entry) => peerMatches(peer, entry))) {
        throw forbidden('peer_not_trusted', 'the client certificate is not a trusted peer of this provider');
      }
    },
  };
}
