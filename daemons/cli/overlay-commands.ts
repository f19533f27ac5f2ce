import { parseArgs } from 'node:util';
import { CanonicalJsonError, canonicalize } from '../../schemas/canonical-json.ts';
import { stableId } from '../../schemas/fnv1a.ts';
import { overlayConfigMapName } from '../../schemas/overlay/configmap-name.ts';
import {
  CONSUMER_DIALECTS,
  type ConsumerDialect,
  DEFAULT_CONSUMER_DIALECT,
  isConsumerDialect,
} from '../../schemas/overlay/dialect.ts';
import { overlayRevision } from '../../schemas/overlay/revision.ts';
import { GATEWAY_MAX_OVERLAY_BYTES, validateOverlay } from '../../schemas/overlay/validate.ts';
import overlaySchema from '../../schemas/overlay/overlay-envelope.schema.json' with { type: 'json' };
import { CliError, usageError } from './cli-error.ts';
import { parseJsonInput, readInput } from './read-input.ts';

/** What a command prints on stdout (exact bytes) and the status it exits with. */
export interface CommandResult {
  readonly stdout: string;
  readonly exitCode: 0 | 1;
  /** One human line for stderr (the detail behind a `reject`). */
  readonly stderr?: string;
}

/** Inputs larger than this are refused by the commands that read whole documents. */
const MAX_DOCUMENT_BYTES = 64 * 1024 * 1024;
const CANDIDATE_KINDS: readonly string[] = overlaySchema.$defs.OverlayCandidate.properties.kind.enum;

export function canonicalCommand(args: readonly string[]): CommandResult {
  const [file] = exactly(args, ['FILE'], 'canonical');
  const value = parseJsonInput(readBounded(file), file);
  try {
    return { stdout: canonicalize(value), exitCode: 0 };
  } catch (error) {
    if (error instanceof CanonicalJsonError) throw new CliError(`${file}: ${error.message}`, 1);
    throw error;
  }
}

export function stableIdCommand(args: readonly string[]): CommandResult {
  const [kind, name, site, cluster] = exactly(args, ['KIND', 'NAME', 'SITE', 'CLUSTER'], 'stable-id');
  if (!CANDIDATE_KINDS.includes(kind))
    throw usageError(`stable-id: KIND must be one of ${CANDIDATE_KINDS.join(', ')}, got "${kind}"`);
  return { stdout: `${stableId(kind, name, site, cluster)}\n`, exitCode: 0 };
}

export function overlayRevisionCommand(args: readonly string[]): CommandResult {
  const [file] = exactly(args, ['FILE'], 'overlay revision');
  const doc = parseJsonInput(readBounded(file), file);
  if (!isObject(doc)) throw new CliError(`${file}: an overlay must be a JSON object`, 1);
  // An envelope carries the payload under "overlay"; a bare payload is the document itself.
  const payload = Object.hasOwn(doc, 'overlay') ? doc['overlay'] : doc;
  if (!isObject(payload) || !Array.isArray(payload['candidates'])) {
    throw new CliError(
      `${file}: no routing payload found (expected "candidates" in the document or in its "overlay")`,
      1,
    );
  }
  try {
    return { stdout: `${overlayRevision(payload)}\n`, exitCode: 0 };
  } catch (error) {
    if (error instanceof CanonicalJsonError) throw new CliError(`${file}: ${error.message}`, 1);
    throw error;
  }
}

export function overlayVerifyCommand(args: readonly string[]): CommandResult {
  const { values, positionals } = parseVerifyOptions(args);
  const [file] = exactly(positionals, ['FILE'], 'overlay verify');
  const maxBytes = values['max-bytes'] === undefined ? GATEWAY_MAX_OVERLAY_BYTES : parseByteCount(values['max-bytes']);
  const dialect = parseConsumer(values.consumer);
  const expectedScope = {
    network: nonBlank(values.network, '--network'),
    gateway: nonBlank(values.gateway, '--gateway'),
    namespace: nonBlank(values.namespace, '--namespace'),
    local_site: nonBlank(values['local-site'], '--local-site'),
  };
  const result = validateOverlay(readInput(file, maxBytes), {
    maxBytes,
    expectedScope,
    allowLegacy: values.legacy === true,
    dialect,
  });
  if (!result.ok) return { stdout: `reject ${result.reason}\n`, exitCode: 1, stderr: `${file}: ${result.message}` };
  return { stdout: result.format === 'legacy' ? 'accept-legacy\n' : `accept ${result.revision}\n`, exitCode: 0 };
}

export function configMapNameCommand(args: readonly string[]): CommandResult {
  const [network, gateway] = exactly(args, ['NETWORK', 'GATEWAY'], 'overlay configmap-name');
  return { stdout: `${overlayConfigMapName(network, gateway)}\n`, exitCode: 0 };
}

function readBounded(file: string): Buffer {
  const data = readInput(file, MAX_DOCUMENT_BYTES);
  if (data.length > MAX_DOCUMENT_BYTES) throw new CliError(`${file}: larger than ${MAX_DOCUMENT_BYTES} bytes`, 2);
  return data;
}

/** Exactly the named positional arguments, each non-empty, or a usage error naming them. */
function exactly<const Names extends readonly string[]>(
  args: readonly string[],
  names: Names,
  command: string,
): { [K in keyof Names]: string } {
  const usage = `usage: agn ${command} ${names.join(' ')}`;
  if (args.length !== names.length)
    throw usageError(`${usage}: expected ${names.length} argument(s), got ${args.length}`);
  const blank = args.findIndex((arg) => arg.trim() === '');
  if (blank >= 0) throw usageError(`${usage}: ${names[blank]} must not be empty`);
  const option = args.findIndex((arg) => arg.startsWith('--'));
  if (option >= 0) throw usageError(`${usage}: unknown option ${args[option]}`);
  return [...args] as { [K in keyof Names]: string };
}

const VERIFY_OPTIONS = {
  network: { type: 'string' },
  gateway: { type: 'string' },
  namespace: { type: 'string' },
  'local-site': { type: 'string' },
  'max-bytes': { type: 'string' },
  legacy: { type: 'boolean' },
  consumer: { type: 'string' },
} as const;

/** --consumer: whose rules decide (this project's gateway, Praxis AI main, Praxis AI with selection groups). */
function parseConsumer(value: string | undefined): ConsumerDialect {
  if (value === undefined) return DEFAULT_CONSUMER_DIALECT;
  if (!isConsumerDialect(value))
    throw usageError(`--consumer must be one of ${CONSUMER_DIALECTS.join(', ')}, got "${value}"`);
  return value;
}

function parseVerifyOptions(args: readonly string[]) {
  try {
    return parseArgs({ args: [...args], options: VERIFY_OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    throw usageError(String((error as Error).message).split('\n')[0] ?? 'invalid arguments');
  }
}

function parseByteCount(text: string): number {
  if (!/^[1-9][0-9]{0,12}$/.test(text)) throw usageError(`--max-bytes must be a positive integer, got "${text}"`);
  return Number(text);
}

function nonBlank(value: string | undefined, flag: string): string | undefined {
  if (value !== undefined && value.trim() === '') throw usageError(`${flag} must not be empty`);
  return value;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
