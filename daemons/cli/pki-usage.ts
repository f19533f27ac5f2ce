// The usage lines of `agn pki`, apart from the commands so `agn --help` does not load the X.509 stack.
export const PKI_INIT_USAGE = 'pki init [FILE] [--dir DIR] [--trust TRUST] [--ca-days N] [--leaf-days N]';
export const PKI_SECRETS_USAGE = 'pki secrets [FILE] --site SITE [--dir DIR]';
export const PKI_RENEW_USAGE =
  'pki renew [FILE] --site SITE --stage|--activate|--finish [--dir DIR] [--trust TRUST] [--leaf-days N]';
export const PKI_STATUS_USAGE = 'pki status [FILE] [--dir DIR] [--trust TRUST]';
