// `agn pki init | secrets | renew | status`: the grid's PKI for a real cluster (grid/pki.ts keeps it on disk).
// init reads the declaration to learn what each site's certificates must say, issues what is missing, and writes
// the public trust file the declaration imports, so synth renders every peer's pin into dist/. secrets prints one
// site's Secret manifests for `kubectl apply -f -` and names the Secrets only the user can make. renew replaces a
// site's pinned provider gateway certificate in three steps no peer ever refuses. status says what expires and
// whether the trust file still matches the certificates.
import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, relative, resolve, sep } from 'node:path';
import { stringify as toYaml } from 'yaml';
import type { SiteSecretNeed } from '../../constructs/site-secrets.ts';
import type { GridTrust } from '../../schemas/generated/grid-trust.ts';
import { checkGridTrust } from '../../schemas/pki/validate.ts';
import { leafMismatch, pemFingerprint } from '../shared/tls.ts';
import { CliError, usageError } from './cli-error.ts';
import { declarationFile, parse, problemsResult } from './grid-commands.ts';
import type { CommandResult } from './overlay-commands.ts';
import { PKI_INIT_USAGE, PKI_RENEW_USAGE, PKI_SECRETS_USAGE, PKI_STATUS_USAGE } from './pki-usage.ts';
import {
  ensurePki,
  PkiError,
  readCaPair,
  readLeaf,
  RENEW_BEFORE_MS,
  renewGateway,
  type RenewStep,
  sitePins,
  type SitePlan,
  trustOf,
  trustText,
} from './pki/grid-pki.ts';
import { siteSecretManifests } from './pki/site-secret-manifests.ts';

export const DEFAULT_PKI_DIR = '.pki';
export const DEFAULT_TRUST_FILE = 'grid-trust.json';

interface Compiled {
  readonly file: string;
  readonly network: string;
  readonly declaredTrust: GridTrust | undefined;
  readonly sites: readonly { readonly site: string; readonly needs: readonly SiteSecretNeed[] }[];
}

/**
 * Builds the declaration in memory (nothing written). `checkPins` off for init and renew, which run before the pins
 * they make exist; a declaration with any other problem is refused with every problem listed, as validate does.
 */
async function compile(file: string, checkPins: boolean): Promise<Compiled | CommandResult> {
  const [{ loadGridDeclaration, GridFileError }, { buildGrid }, { GridSynthError }, { App }] = await Promise.all([
    import('../../constructs/grid-file.ts'),
    import('../../constructs/grid.ts'),
    import('../../constructs/synth-error.ts'),
    import('cdk8s'),
  ]);
  let declaration;
  try {
    declaration = await loadGridDeclaration(file);
  } catch (error) {
    if (error instanceof GridFileError) throw new CliError(error.message, 1);
    throw error;
  }
  try {
    const built = buildGrid(new App(), declaration, { checkPins });
    return {
      file,
      network: declaration.network.name,
      declaredTrust: declaration.trust,
      sites: built.sites.map((stack) => ({ site: stack.siteName, needs: stack.secretNeeds })),
    };
  } catch (error) {
    if (error instanceof GridSynthError) return problemsResult(file, error.lines);
    throw error;
  }
}

function plansOf(compiled: Compiled): SitePlan[] {
  return compiled.sites.map(({ site, needs }) => {
    const provider = needs.find((n) => n.purpose === 'gateway-tls' && n.role === 'provider');
    const consumer = needs.find((n) => n.purpose === 'gateway-tls' && n.role === 'consumer');
    return {
      site,
      ...(provider?.purpose === 'gateway-tls' && provider.role === 'provider'
        ? { providerServerNames: provider.serverNames }
        : {}),
      ...(consumer?.purpose === 'gateway-tls' && consumer.role === 'consumer'
        ? { consumer: { gateway: consumer.gateway, organizations: consumer.organizations } }
        : {}),
      simulatedCredentials: needs.flatMap((n) =>
        n.purpose === 'provider-credential' && n.simulated ? n.keys.map((key) => ({ name: n.name, key })) : [],
      ),
      tokens: [
        ...(needs.some((n) => n.purpose === 'dashboard-token') ? ['dashboard' as const] : []),
        ...(needs.some((n) => n.purpose === 'ingest-token') ? ['ingest' as const] : []),
      ],
    };
  });
}

function positiveDays(value: string | undefined, flag: string, usage: string): number | undefined {
  if (value === undefined) return undefined;
  const days = Number(value);
  if (!/^[1-9][0-9]{0,4}$/u.test(value) || days > 36500)
    throw usageError(`usage: agn ${usage}: ${flag} must be a whole number of days from 1 to 36500`);
  return days;
}

function guard<T>(run: () => T): T {
  try {
    return run();
  } catch (error) {
    if (error instanceof PkiError) throw new CliError(error.message, 1);
    throw error;
  }
}

async function guardAsync<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof PkiError) throw new CliError(error.message, 1);
    throw error;
  }
}

/** The trust file on disk, when there is one; a broken one is an error, never silently replaced. */
function readTrustFile(path: string): GridTrust | undefined {
  if (!existsSync(path)) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new CliError(
      `${path}: not JSON (${(error as Error).message.split('\n')[0]}); restore it from git, or remove it to write a new one`,
      1,
    );
  }
  const checked = checkGridTrust(value);
  if (!checked.ok)
    throw new CliError(`${path}: ${checked.error}; restore it from git, or remove it to write a new one`, 1);
  return checked.value;
}

function writeTrust(path: string, dir: string, compiled: Compiled): GridTrust {
  const before = readTrustFile(path);
  const trust = guard(() => trustOf(dir, compiled.network, plansOf(compiled)));
  if (before !== undefined && before.ca.fingerprint !== trust.ca.fingerprint) {
    throw new CliError(
      `${path} belongs to another PKI (CA ${before.ca.fingerprint.slice(0, 16)}…, ${dir} has ${trust.ca.fingerprint.slice(0, 16)}…); point --dir at that PKI, or remove ${path} to start the grid's trust anew`,
      1,
    );
  }
  writeFileSync(path, trustText(trust));
  return trust;
}

function pinSummary(trust: GridTrust): string {
  const sites = Object.entries(trust.sites).map(([site, entry]) => `${site} ${entry?.gatewayPins.length ?? 0}`);
  return sites.length === 0 ? 'no pins' : `pins: ${sites.join(', ')}`;
}

export async function pkiInitCommand(args: readonly string[]): Promise<CommandResult> {
  const { values, positionals } = parse(
    args,
    PKI_INIT_USAGE,
    {
      dir: { type: 'string' },
      trust: { type: 'string' },
      'ca-days': { type: 'string' },
      'leaf-days': { type: 'string' },
    },
    1,
  );
  const file = declarationFile(positionals);
  const dir = values.dir ?? DEFAULT_PKI_DIR;
  const trustPath = values.trust ?? DEFAULT_TRUST_FILE;
  const caDays = positiveDays(values['ca-days'], '--ca-days', PKI_INIT_USAGE);
  const leafDays = positiveDays(values['leaf-days'], '--leaf-days', PKI_INIT_USAGE);
  const compiled = await compile(file, false);
  if ('exitCode' in compiled) return compiled;
  // Check the existing trust file before anything is issued, so a wrong --dir creates no second CA.
  const before = readTrustFile(trustPath);
  if (before !== undefined && before.network !== compiled.network) {
    throw new CliError(
      `${trustPath} is the trust file of network ${before.network}, not ${compiled.network}; pass --trust for this network's file`,
      1,
    );
  }
  if (before !== undefined && !existsSync(`${dir}/ca.crt`)) {
    throw new CliError(
      `${trustPath} exists but ${dir} holds no CA: point --dir at the PKI it was made from (a new CA would invalidate every certificate of the grid), or remove ${trustPath} to start anew`,
      1,
    );
  }
  const { changes, warnings } = await guardAsync(() =>
    ensurePki(dir, compiled.network, plansOf(compiled), {
      ...(caDays === undefined ? {} : { caDays }),
      ...(leafDays === undefined ? {} : { leafDays }),
    }),
  );
  const trust = writeTrust(trustPath, dir, compiled);
  const lines = [
    ...(changes.length === 0 ? [`${dir}: every certificate and key is current`] : changes),
    `wrote ${trustPath} (${pinSummary(trust)}; no key or token in it: commit it beside ${file})`,
    'next:',
    `  pass it as the declaration's trust: trust: readGridTrust(new URL('${importPath(file, trustPath)}', import.meta.url)) (from agn-ts)`,
    "  npm run synth       # renders every peer's pin into dist/",
    ...compiled.sites.map(
      ({ site }) =>
        `  agn pki secrets --site ${site}${dir === DEFAULT_PKI_DIR ? '' : ` --dir ${dir}`} | kubectl --context <${site}> apply -f -`,
    ),
    `keep ${dir} out of git (CA key, private keys, SWIM key, tokens): back it up where your other cluster secrets live`,
    '',
  ];
  return {
    stdout: lines.join('\n'),
    exitCode: 0,
    ...(warnings.length > 0 ? { stderr: warnings.map((w) => `warning: ${w}`).join('\n') } : {}),
  };
}

/** The declaration's trust must describe the certificates in `dir`, or the Secrets would not match dist/. */
function trustMismatch(compiled: Compiled, dir: string): string | undefined {
  const declared = compiled.declaredTrust;
  if (declared === undefined) return `${compiled.file} passes no trust file`;
  const ca = guard(() => pemFingerprint(readCaPair(dir).certPem));
  if (declared.ca.fingerprint !== ca)
    return `its trust file names CA ${declared.ca.fingerprint.slice(0, 16)}…, ${dir} holds CA ${ca.slice(0, 16)}…`;
  for (const { site, needs } of compiled.sites) {
    if (!needs.some((n) => n.purpose === 'gateway-tls' && n.role === 'provider')) continue;
    const pins = guard(() => sitePins(dir, site));
    const listed = declared.sites[site]?.gatewayPins ?? [];
    if (pins.join(',') !== listed.join(','))
      return `site ${site}'s pins in the trust file are not those of the certificates in ${dir}`;
  }
  return undefined;
}

export async function pkiSecretsCommand(args: readonly string[]): Promise<CommandResult> {
  const { values, positionals } = parse(
    args,
    PKI_SECRETS_USAGE,
    { site: { type: 'string' }, dir: { type: 'string' } },
    1,
  );
  if (values.site === undefined || values.site === '')
    throw usageError(`usage: agn ${PKI_SECRETS_USAGE}: --site is required`);
  const file = declarationFile(positionals);
  const dir = values.dir ?? DEFAULT_PKI_DIR;
  if (!existsSync(`${dir}/ca.crt`))
    throw new CliError(
      `${dir}: no grid PKI here (no ca.crt); run agn pki init${dir === DEFAULT_PKI_DIR ? '' : ` --dir ${dir}`} first`,
      1,
    );
  const compiled = await compile(file, true);
  if ('exitCode' in compiled) return compiled;
  const entry = compiled.sites.find((s) => s.site === values.site);
  if (entry === undefined)
    throw new CliError(`${file}: no site ${values.site} (sites: ${compiled.sites.map((s) => s.site).join(', ')})`, 1);
  const mismatch = trustMismatch(compiled, dir);
  if (mismatch !== undefined)
    throw new CliError(
      `${file}: ${mismatch}; run agn pki init${dir === DEFAULT_PKI_DIR ? '' : ` --dir ${dir}`}, then synthesize, so dist/ pins what the Secrets carry`,
      1,
    );
  const { secrets, user } = guard(() => siteSecretManifests(dir, compiled.network, entry.site, entry.needs));
  const stdout = secrets.map((secret) => toYaml(secret)).join('---\n');
  const stderr = [
    `${secrets.length} Secrets of site ${entry.site} from ${dir} (they hold private keys: pipe them to kubectl, do not store them)`,
    ...(user.length === 0
      ? []
      : [
          `create these yourself (${user.length}):`,
          ...user.map((u) => `  ${u.need.namespace}/${u.need.name}: ${u.how}`),
        ]),
  ].join('\n');
  return { stdout, stderr, exitCode: 0 };
}

export async function pkiRenewCommand(args: readonly string[]): Promise<CommandResult> {
  const { values, positionals } = parse(
    args,
    PKI_RENEW_USAGE,
    {
      site: { type: 'string' },
      dir: { type: 'string' },
      trust: { type: 'string' },
      'leaf-days': { type: 'string' },
      stage: { type: 'boolean' },
      activate: { type: 'boolean' },
      finish: { type: 'boolean' },
    },
    1,
  );
  if (values.site === undefined || values.site === '')
    throw usageError(`usage: agn ${PKI_RENEW_USAGE}: --site is required`);
  const steps = (['stage', 'activate', 'finish'] as const).filter((step) => values[step] === true);
  if (steps.length !== 1)
    throw usageError(`usage: agn ${PKI_RENEW_USAGE}: give exactly one of --stage, --activate, --finish`);
  const step = steps[0] as RenewStep;
  const leafDays = positiveDays(values['leaf-days'], '--leaf-days', PKI_RENEW_USAGE);
  const file = declarationFile(positionals);
  const dir = values.dir ?? DEFAULT_PKI_DIR;
  const trustPath = values.trust ?? DEFAULT_TRUST_FILE;
  const compiled = await compile(file, false);
  if ('exitCode' in compiled) return compiled;
  const plan = plansOf(compiled).find((p) => p.site === values.site);
  if (plan === undefined)
    throw new CliError(`${file}: no site ${values.site} (sites: ${compiled.sites.map((s) => s.site).join(', ')})`, 1);
  if (plan.providerServerNames === undefined)
    throw new CliError(
      `${file}: site ${plan.site} has no provider gateway, so it has no pinned certificate to renew`,
      1,
    );
  const serverNames = plan.providerServerNames;
  const message = await guardAsync(() =>
    renewGateway(dir, plan.site, step, serverNames, leafDays === undefined ? {} : { leafDays }),
  );
  const trust = writeTrust(trustPath, dir, compiled);
  return { stdout: `${message}\nwrote ${trustPath} (${pinSummary(trust)})\n`, exitCode: 0 };
}

export async function pkiStatusCommand(args: readonly string[]): Promise<CommandResult> {
  const { values, positionals } = parse(
    args,
    PKI_STATUS_USAGE,
    { dir: { type: 'string' }, trust: { type: 'string' } },
    1,
  );
  const file = declarationFile(positionals);
  const dir = values.dir ?? DEFAULT_PKI_DIR;
  const trustPath = values.trust ?? DEFAULT_TRUST_FILE;
  if (!existsSync(`${dir}/ca.crt`))
    throw new CliError(
      `${dir}: no grid PKI here (no ca.crt); run agn pki init${dir === DEFAULT_PKI_DIR ? '' : ` --dir ${dir}`} first`,
      1,
    );
  const compiled = await compile(file, false);
  if ('exitCode' in compiled) return compiled;
  const now = Date.now();
  const rows: string[] = [];
  const problems: string[] = [];
  const check = (label: string, read: () => { certPem: string }): void => {
    let pem: string;
    try {
      pem = read().certPem;
    } catch (error) {
      problems.push(`${label}: ${(error as Error).message}`);
      return;
    }
    const until = leafValidTo(pem);
    const days = Math.floor((until - now) / 86_400_000);
    rows.push(`${label}  expires ${new Date(until).toISOString().slice(0, 10)} (${days} days)`);
    if (leafMismatch(pem, { minRemainingMs: RENEW_BEFORE_MS }, now) !== undefined)
      problems.push(
        `${label}: expires in ${days} days${label.endsWith('provider-gateway') ? `: agn pki renew --site ${label.split(' ')[0]} --stage` : ': agn pki init re-issues it'}`,
      );
  };
  check('grid CA', () => readCaPair(dir));
  for (const plan of plansOf(compiled)) {
    check(`${plan.site} site`, () => readLeaf(dir, plan.site, 'site'));
    if (plan.providerServerNames !== undefined)
      check(`${plan.site} provider-gateway`, () => readLeaf(dir, plan.site, 'provider-gateway'));
    if (plan.consumer !== undefined)
      check(`${plan.site} consumer-gateway`, () => readLeaf(dir, plan.site, 'consumer-gateway'));
  }
  const trust = readTrustFile(trustPath);
  if (trust === undefined) problems.push(`${trustPath}: missing; agn pki init writes it`);
  else {
    for (const plan of plansOf(compiled)) {
      if (plan.providerServerNames === undefined) continue;
      const pins = guard(() => sitePins(dir, plan.site));
      if ((trust.sites[plan.site]?.gatewayPins ?? []).join(',') !== pins.join(','))
        problems.push(
          `${trustPath}: site ${plan.site}'s pins are not those of its certificates in ${dir}: agn pki init rewrites it`,
        );
    }
    const mismatch =
      compiled.declaredTrust === undefined
        ? `${file} passes no trust file`
        : compiled.declaredTrust.ca.fingerprint !== trust.ca.fingerprint ||
            JSON.stringify(compiled.declaredTrust.sites) !== JSON.stringify(trust.sites)
          ? `${file} passes a trust file other than ${trustPath}, or dist/ was synthesized before its last change`
          : undefined;
    if (mismatch !== undefined) problems.push(mismatch);
  }
  const stdout = [
    ...rows,
    ...(problems.length === 0
      ? ['ok: every certificate is valid for 30 days or more and the trust file matches them']
      : []),
  ].join('\n');
  return {
    stdout: `${stdout}\n`,
    exitCode: problems.length === 0 ? 0 : 1,
    ...(problems.length === 0 ? {} : { stderr: problems.join('\n') }),
  };
}

/** `trust` as a relative module specifier from the declaration file's directory. */
function importPath(file: string, trust: string): string {
  const path = relative(dirname(resolve(file)), resolve(trust))
    .split(sep)
    .join('/');
  return path.startsWith('.') ? path : `./${path}`;
}

function leafValidTo(pem: string): number {
  return Date.parse(new X509Certificate(pem).validTo);
}
