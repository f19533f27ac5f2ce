import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SHARED_FIXTURES } from '../fixtures-path.ts';

const RFC = join(SHARED_FIXTURES, 'rfc8785');

/** Each line of es6-numbers-first10000.txt: IEEE-754 bits in hex, comma, the expected ECMAScript text. */
export function readNumberVectors(): { bits: string; value: number; expected: string }[] {
  const lines = readFileSync(join(RFC, 'es6-numbers-first10000.txt'), 'utf8').split('\n');
  return lines
    .slice(1) // first line names the source
    .filter((line) => line.length > 0)
    .map((line) => {
      const [bits, expected] = line.split(',') as [string, string];
      const view = new DataView(new ArrayBuffer(8));
      view.setBigUint64(0, BigInt(`0x${bits}`));
      return { bits, value: view.getFloat64(0), expected };
    });
}
