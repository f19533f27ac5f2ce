// A credential as the gateway refers to it: the Secret (name, namespace, key) and strategy credential_inject looks
// the token up by. Only the reference travels with a request; the token bytes stay in credential_inject.

export interface CredentialRef {
  readonly name?: string;
  readonly namespace?: string;
  readonly key?: string;
  readonly strategy?: string;
}

/**
 * An overlay candidate's or a provider route's credential as credential_inject looks it up (a route may leave the
 * strategy out: bearer_token). Made once per snapshot or config and frozen, as every request shares it.
 */
export function credentialRef(
  credential:
    | {
        readonly strategy?: string;
        readonly secretRef: { readonly name: string; readonly namespace: string; readonly key: string };
      }
    | undefined,
): CredentialRef | undefined {
  return credential === undefined
    ? undefined
    : Object.freeze({ strategy: credential.strategy ?? 'bearer_token', ...credential.secretRef });
}
