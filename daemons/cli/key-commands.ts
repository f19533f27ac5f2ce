// `agn key mint` and `agn key revoke`: edit a caller keys file (schemas/gateway/caller-keys.schema.json) in place.
// Mint prints the new key once on stdout and stores only its salted hash; nothing else ever prints a key or hash.
// The file is written whole to a temporary name and renamed, so a gateway reading it never sees half a file.
import { existsSync, renameSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { type CallerKeysFile, mintCallerKey, readCallerKeysFile } from '../../schemas/gateway/caller-keys.ts';
import schema from '../../schemas/gateway/caller-keys.schema.json' with { type: 'json' };
import { CliError, usageError } from './cli-error.ts';
import type { CommandResult } from './overlay-commands.ts';

export const KEY_MINT_USAGE = 'key mint --tenant TENANT --keys-file FILE';
export const KEY_REVOKE_USAGE = 'key revoke --id ID --keys-file FILE';
const TENANT = new RegExp(schema.$defs.CallerKeyEntry.properties.tenant.pattern);

function options(args: readonly string[], usage: string, flag: 'tenant' | 'id'): { value: string; file: string } {
  let values: Record<string, string | undefined>;
  try {
    values = parseArgs({
      args: [...args],
      options: { [flag]: { type: 'string' }, 'keys-file': { type: 'string' } },
      strict: true,
    }).values as Record<string, string | undefined>;
  } catch (error) {
    throw usageError(`usage: agn ${usage}: ${String((error as Error).message).split('\n')[0]}`);
  }
  const value = values[flag];
  const file = values['keys-file'];
  if (value === undefined || value === '') throw usageError(`usage: agn ${usage}: --${flag} is required`);
  if (file === undefined || file === '') throw usageError(`usage: agn ${usage}: --keys-file is required`);
  return { value, file };
}

function load(file: string, create: boolean): CallerKeysFile {
  if (create && !existsSync(file)) return { keys: [] };
  try {
    return readCallerKeysFile(file);
  } catch (error) {
    throw new CliError((error as Error).message, 1);
  }
}

function save(file: string, document: CallerKeysFile): void {
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(document, null, 2)}\n`, { mode: 0o600 });
  renameSync(temporary, file);
}

export function keyMintCommand(args: readonly string[]): CommandResult {
  const { value: tenant, file } = options(args, KEY_MINT_USAGE, 'tenant');
  if (tenant.length > 128 || !TENANT.test(tenant))
    throw usageError(`key mint: --tenant "${tenant.slice(0, 128)}" is not a tenant id (letters, digits, - _ . :)`);
  const document = load(file, true);
  const { key, entry } = mintCallerKey(tenant);
  save(file, { keys: [...document.keys, entry] });
  return {
    stdout: `${key}\n`,
    exitCode: 0,
    stderr: `key ${entry.id} for tenant ${tenant} added to ${file}; the key is shown only this once`,
  };
}

export function keyRevokeCommand(args: readonly string[]): CommandResult {
  const { value: id, file } = options(args, KEY_REVOKE_USAGE, 'id');
  const document = load(file, false);
  const entry = document.keys.find((k) => k.id === id);
  if (entry === undefined) throw new CliError(`${file}: no key with id "${id.slice(0, 64)}"`, 1);
  save(file, { keys: document.keys.map((k) => (k.id === id ? { ...k, revoked: true } : k)) });
  return {
    stdout: '',
    exitCode: 0,
    stderr:
      `key ${id} of tenant ${entry.tenant} revoked in ${file}; a gateway reading this file refuses it within about 0.3 s. ` +
      'In a cluster, apply the file to the caller keys Secret: the gateways refuse the key once the kubelet syncs the Secret into their pods (up to its syncFrequency, 1 min by default, plus its cache delay: about 60-90 s), no restart needed',
  };
}
