/**
 * Enrollment endpoint configuration. Off unless an address is given, so existing operators change nothing.
 * The files are read at start and followed on disk (enrollment/server.ts), never logged with their contents.
 */
import { parseListenAddress } from '../../shared/admin-server.ts';
import { CERTIFICATE_LIFETIME_RULE, checkDuration } from '../../../schemas/durations.ts';

export interface EnrollmentConfig {
  /** HOST:PORT of the HTTPS redeem endpoint. */
  readonly address: string;
  /** This operator's site certificate and key (PEM): the endpoint's server identity, checked against the grid CA. */
  readonly tlsCertFile: string;
  readonly tlsKeyFile: string;
  /** The grid CA certificate and private key (PEM) that sign the issued site certificates. */
  readonly caCertFile: string;
  readonly caKeyFile: string;
  /** Lifetime of an issued site certificate (capped by the CA's own expiry). */
  readonly certificateLifetimeMs: number;
}

export const DEFAULT_CERTIFICATE_LIFETIME = '2160h';

export const ENROLLMENT_OPTIONS = {
  'enrollment-address': { type: 'string' },
  'enrollment-tls-cert': { type: 'string' },
  'enrollment-tls-key': { type: 'string' },
  'grid-ca-cert': { type: 'string' },
  'grid-ca-key': { type: 'string' },
  'enrollment-cert-lifetime': { type: 'string' },
} as const;

export const ENROLLMENT_USAGE = `  --enrollment-address HOST:PORT  serve the SiteInvite redeem endpoint over HTTPS (env GRID_ENROLLMENT_ADDRESS; off by default)
  --enrollment-tls-cert FILE      this site's certificate (PEM) the endpoint serves (env GRID_ENROLLMENT_TLS_CERT)
  --enrollment-tls-key FILE       its private key (env GRID_ENROLLMENT_TLS_KEY)
  --grid-ca-cert FILE             grid CA certificate that signs enrolled sites (env GRID_CA_CERT)
  --grid-ca-key FILE              grid CA private key (env GRID_CA_KEY); the four files are followed on disk (a renewed
                                  certificate or CA is served without a restart; SIGHUP re-reads them at once)
  --enrollment-cert-lifetime DUR  issued site certificate lifetime, 1h..8760h (env GRID_ENROLLMENT_CERT_LIFETIME; default ${DEFAULT_CERTIFICATE_LIFETIME})
`;

type Pick = (flag: keyof typeof ENROLLMENT_OPTIONS, variable: string) => string | undefined;

/** The enrollment settings, or undefined when no address is configured. Throws Error naming the flag. */
export function parseEnrollmentConfig(pick: Pick): EnrollmentConfig | undefined {
  const address = pick('enrollment-address', 'GRID_ENROLLMENT_ADDRESS');
  if (address === undefined) return undefined;
  try {
    parseListenAddress(address);
  } catch {
    throw new Error(`--enrollment-address (env GRID_ENROLLMENT_ADDRESS): "${address.slice(0, 80)}" must be HOST:PORT`);
  }
  const required = (flag: keyof typeof ENROLLMENT_OPTIONS, variable: string, what: string): string => {
    const value = pick(flag, variable);
    if (value === undefined)
      throw new Error(`--${flag} (env ${variable}) is required with --enrollment-address: ${what}`);
    return value;
  };
  const lifetimeText =
    pick('enrollment-cert-lifetime', 'GRID_ENROLLMENT_CERT_LIFETIME') ?? DEFAULT_CERTIFICATE_LIFETIME;
  const lifetime = checkDuration(
    '--enrollment-cert-lifetime (env GRID_ENROLLMENT_CERT_LIFETIME)',
    lifetimeText,
    CERTIFICATE_LIFETIME_RULE,
  );
  if (!lifetime.ok) throw new Error(lifetime.message);
  return {
    address,
    tlsCertFile: required('enrollment-tls-cert', 'GRID_ENROLLMENT_TLS_CERT', "this site's certificate file (PEM)"),
    tlsKeyFile: required('enrollment-tls-key', 'GRID_ENROLLMENT_TLS_KEY', "this site's private key file (PEM)"),
    caCertFile: required('grid-ca-cert', 'GRID_CA_CERT', 'the grid CA certificate file (PEM)'),
    caKeyFile: required('grid-ca-key', 'GRID_CA_KEY', 'the grid CA private key file (PEM)'),
    certificateLifetimeMs: lifetime.ms,
  };
}
