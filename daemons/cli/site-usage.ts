/** Usage lines of the `agn site` commands, apart from their code so `agn --help` does not load the crypto stack. */
export const KEYGEN_USAGE = 'site keygen DIR';
export const ENROLL_USAGE =
  'site enroll --url https://HOST:PORT --ca FILE --token-id ID --token-file FILE --site NAME --out DIR [--signer SITE]';
