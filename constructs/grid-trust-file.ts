/**
 * Reads the trust file `agn pki init` writes (grid-trust.json) for a declaration's `trust`. A file that does not
 * exist yet gives undefined, so the first `agn pki init` can load the declaration that will import it (synth then
 * names the sites that still lack a pin); a file that is there but not JSON fails the load, naming the file. Its
 * fields are checked by synth against the schema.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { GridTrust } from '../schemas/generated/grid-trust.ts';

export function readGridTrust(file: string | URL): GridTrust | undefined {
  const path = typeof file === 'string' ? file : fileURLToPath(file);
  if (!existsSync(path)) return undefined;
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as GridTrust;
  } catch (error) {
    throw new Error(`${path}: not a trust file: ${(error as Error).message.split('\n')[0]}`);
  }
}
