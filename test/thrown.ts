import { expect } from 'vitest';

/**
 * The message of the error `fn` throws, which must be an instance of `type` (a config or synth error names the flag
 * or prop; the tests assert on that text). Fails the test when `fn` returns normally.
 */
export function thrownMessage(fn: () => unknown, type: abstract new (...args: never[]) => Error): string {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(type);
    return (error as Error).message;
  }
  throw new Error(`expected a ${type.name}, but nothing was thrown`);
}
