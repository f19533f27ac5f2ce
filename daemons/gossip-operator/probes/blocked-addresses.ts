/**
 * Addresses model discovery refuses: loopback, localhost, link-local, unspecified and
 * cloud metadata endpoints, so a provider spec cannot turn the operator into a probe of its own node or of the
 * cloud's credential service. Other unique-local IPv6 addresses stay allowed.
 */
import { isIP } from 'node:net';

/** Metadata services that do not fall in a range below: AWS IMDS and EKS Pod Identity over IPv6, Alibaba. */
const METADATA_ADDRESSES = new Set(['fd00:ec2::254', 'fd00:ec2::23', '100.100.100.200']);

export function isBlockedHostname(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return host === 'localhost' || host.endsWith('.localhost') || host === 'metadata.google.internal';
}

export function isBlockedAddress(address: string): boolean {
  const ip = address.replace(/^\[|\]$/g, '').toLowerCase();
  const family = isIP(ip);
  if (family === 4) return blockedV4(ip);
  if (family !== 6) return false;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(ip)?.[1];
  if (mapped !== undefined) return blockedV4(mapped);
  const expanded = expandV6(ip);
  if (expanded === '0000:0000:0000:0000:0000:0000:0000:0000' || expanded === '0000:0000:0000:0000:0000:0000:0000:0001')
    return true;
  if (/^fe[89ab]/.test(expanded)) return true; // fe80::/10 link-local
  return [...METADATA_ADDRESSES].some((blocked) => isIP(blocked) === 6 && expandV6(blocked) === expanded);
}

function blockedV4(ip: string): boolean {
  const [a, b] = ip.split('.').map(Number) as [number, number];
  if (a === 127 || a === 0) return true; // loopback, unspecified ("this network")
  if (a === 169 && b === 254) return true; // link-local, incl. 169.254.169.254 (AWS/GCP/Azure) and 169.254.170.23 (EKS)
  return METADATA_ADDRESSES.has(ip);
}

function expandV6(ip: string): string {
  const [head = '', tail = ''] = ip.split('::');
  const headParts = head === '' ? [] : head.split(':');
  const tailParts = ip.includes('::') ? (tail === '' ? [] : tail.split(':')) : [];
  const missing = 8 - headParts.length - tailParts.length;
  const parts = [...headParts, ...Array.from({ length: Math.max(0, missing) }, () => '0'), ...tailParts];
  return parts.map((p) => p.padStart(4, '0')).join(':');
}
