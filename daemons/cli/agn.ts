#!/usr/bin/env node
/**
 * `agn`: the overlay contract tools (canonical JSON, stable ids, revisions, verification, ConfigMap names) and the
 * entry point of the local grid. Output formats are exact so scripts can rely on them; errors are one line on
 * stderr with exit 1 (bad input) or 2 (usage, unreadable file), never a stack trace.
 */
import { CliError, usageError } from './cli-error.ts';
import {
  type CommandResult,
  canonicalCommand,
  configMapNameCommand,
  overlayRevisionCommand,
  overlayVerifyCommand,
  stableIdCommand,
} from './overlay-commands.ts';
import { UP_USAGE, upCommand } from './up.ts';
import {
  INIT_USAGE,
  SYNTH_USAGE,
  VALIDATE_USAGE,
  initCommand,
  synthCommand,
  validateCommand,
} from './grid-commands.ts';
import { ENROLL_USAGE, KEYGEN_USAGE } from './site-usage.ts';
import { KEY_MINT_USAGE, KEY_REVOKE_USAGE, keyMintCommand, keyRevokeCommand } from './key-commands.ts';
import { PKI_INIT_USAGE, PKI_RENEW_USAGE, PKI_SECRETS_USAGE, PKI_STATUS_USAGE } from './pki-usage.ts';

interface Command {
  readonly usage: string;
  readonly summary: string;
  readonly run: (args: readonly string[]) => CommandResult | Promise<CommandResult>;
}

const COMMANDS: Readonly<Record<string, Command>> = {
  up: {
    usage: UP_USAGE,
    summary:
      'run the compiled grid (dist/) on this machine: every site on loopback, a live table and a curl; --check stops after the first routed request (CI=true implies it), --demo narrates the main flows',
    run: upCommand,
  },
  init: {
    usage: INIT_USAGE,
    summary:
      'scaffold a grid repository in DIR (package.json, cdk8s.yaml, a grid.ts declaration of one site, README); --package sets the dependency spec (default: this version); refuses a non-empty DIR without --force',
    run: initCommand,
  },
  validate: {
    usage: VALIDATE_USAGE,
    summary:
      'check a grid declaration (default grid.ts): every problem at once, one line each naming the site, field and fix; writes nothing',
    run: validateCommand,
  },
  synth: {
    usage: SYNTH_USAGE,
    summary:
      'compile a grid declaration (default grid.ts) into --out, $CDK8S_OUTDIR or dist/: the cdk8s app of a grid repository',
    run: synthCommand,
  },
  canonical: {
    usage: 'canonical FILE',
    summary: 'print the RFC 8785 canonical bytes of the JSON in FILE ("-" for stdin), no newline added',
    run: canonicalCommand,
  },
  'stable-id': {
    usage: 'stable-id KIND NAME SITE CLUSTER',
    summary: 'print the candidate stable_id (FNV-1a 32 of KIND/NAME/SITE/CLUSTER, 8 hex digits)',
    run: stableIdCommand,
  },
  'overlay revision': {
    usage: 'overlay revision FILE',
    summary: 'print the content-addressed revision (64 hex) of an overlay envelope or bare payload',
    run: overlayRevisionCommand,
  },
  'overlay verify': {
    usage:
      'overlay verify FILE [--consumer agn|praxis-main|praxis-groups] [--network N] [--gateway G] [--namespace NS] [--local-site S] [--max-bytes B] [--legacy]',
    summary:
      'validate an overlay as that consumer would (default agn, our gateway): "accept <revision>" (exit 0) or "reject <reason>" with the detail on stderr (exit 1)',
    run: overlayVerifyCommand,
  },
  'overlay configmap-name': {
    usage: 'overlay configmap-name NETWORK GATEWAY',
    summary: 'print the name of the overlay ConfigMap for a network and gateway (63-character rule)',
    run: configMapNameCommand,
  },
  'site keygen': {
    usage: KEYGEN_USAGE,
    summary:
      "make this site's key pair in DIR/tls.key (0600; kept if present) and print its publicKeySHA256 for a key-bound SiteInvite",
    // Loaded on use: the X.509 stack is only needed by these two commands.
    run: async (args) => (await import('./site-commands.ts')).keygenCommand(args),
  },
  'site enroll': {
    usage: ENROLL_USAGE,
    summary:
      'redeem a SiteInvite token at the signer: sends a CSR (the key stays here), verifies the signer against --ca, writes tls.crt, tls.key (0600) and ca.crt to --out',
    run: async (args) => (await import('./site-commands.ts')).enrollCommand(args),
  },
  'key mint': {
    usage: KEY_MINT_USAGE,
    summary:
      "mint a caller API key for TENANT: prints the key once on stdout, appends only its salted hash to FILE (created 0600 if absent; mount it as the consumer gateway's caller_auth keys_file)",
    run: keyMintCommand,
  },
  'pki init': {
    usage: PKI_INIT_USAGE,
    summary:
      "make or refresh the grid's PKI in DIR (default .pki: grid CA, per site its identity, provider gateway and consumer gateway certificates, the SWIM key, simulated backends' tokens) from the declaration (default grid.ts), and write the public trust file TRUST (default grid-trust.json: CA certificate and each site's pins) for the declaration to import",
    run: async (args) => (await import('./pki-commands.ts')).pkiInitCommand(args),
  },
  'pki secrets': {
    usage: PKI_SECRETS_USAGE,
    summary:
      'print the Secret manifests of SITE from the PKI in DIR for kubectl apply -f - (every Secret its manifests name that the PKI holds); lists on stderr the ones to create yourself',
    run: async (args) => (await import('./pki-commands.ts')).pkiSecretsCommand(args),
  },
  'pki renew': {
    usage: PKI_RENEW_USAGE,
    summary:
      "renew SITE's pinned provider gateway certificate in three steps no peer refuses: --stage (next certificate, both pinned), --activate (it serves), --finish (old pin dropped); rewrites TRUST",
    run: async (args) => (await import('./pki-commands.ts')).pkiRenewCommand(args),
  },
  'pki status': {
    usage: PKI_STATUS_USAGE,
    summary:
      "each certificate's expiry and whether TRUST and the declaration's trust match the certificates in DIR; exit 1 on a problem (expired, under 30 days, pins out of date)",
    run: async (args) => (await import('./pki-commands.ts')).pkiStatusCommand(args),
  },
  'key revoke': {
    usage: KEY_REVOKE_USAGE,
    summary:
      'mark the key with ID revoked in FILE; a consumer gateway reading FILE answers it 401 within about 0.3 s; in a cluster apply FILE to the caller keys Secret, and the gateways refuse it once the kubelet syncs the Secret (about 60-90 s)',
    run: keyRevokeCommand,
  },
};

export function helpText(): string {
  const lines = Object.values(COMMANDS).map((c) => `  agn ${c.usage}  -  ${c.summary}`);
  return ['Usage: agn COMMAND [ARGS]', '', 'Commands:', ...lines, '  agn --help  -  show this help', ''].join('\n');
}

async function main(argv: readonly string[]): Promise<number> {
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') {
    process.stdout.write(helpText());
    return argv.length === 0 ? 2 : 0;
  }
  const twoWord = `${argv[0]} ${argv[1] ?? ''}`;
  const [name, args] = COMMANDS[twoWord] ? [twoWord, argv.slice(2)] : [argv[0] ?? '', argv.slice(1)];
  const command = COMMANDS[name];
  if (command === undefined) {
    throw usageError(
      argv[0] === 'overlay' || argv[0] === 'site' || argv[0] === 'key' || argv[0] === 'pki'
        ? `unknown ${argv[0]} command "${argv[1] ?? ''}"`
        : `unknown command "${argv[0]}"`,
    );
  }
  if (args.includes('--help')) {
    process.stdout.write(`usage: agn ${command.usage}\n${command.summary}\n`);
    return 0;
  }
  const result = await command.run(args);
  process.stdout.write(result.stdout);
  if (result.stderr) process.stderr.write(`${result.stderr}\n`);
  return result.exitCode;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    if (error instanceof CliError) {
      process.stderr.write(`agn: ${error.message}\n`);
      process.exitCode = error.exitCode;
    } else {
      const message = error instanceof Error ? error.message : String(error);
      process.stderr.write(`agn: internal error: ${message.split('\n')[0]}\n`);
      process.exitCode = 2;
    }
  },
);
