import { GridSynthError } from '../../constructs/synth-error.ts';
import { thrownMessage } from '../thrown.ts';

/** The message of the GridSynthError that `fn` throws; fails the test when it throws nothing or something else. */
export function synthFailure(fn: () => unknown): string {
  return thrownMessage(fn, GridSynthError);
}
