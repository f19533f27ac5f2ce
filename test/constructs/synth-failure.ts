import { expect } from 'vitest';
import { GridSynthError } from '../../constructs/synth-error.ts';

/** The message of the GridSynthError that `fn` throws; fails the test when it throws nothing or something else. */
export function synthFailure(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(GridSynthError);
    return (error as Error).message;
  }
  throw new Error('did not throw');
}
