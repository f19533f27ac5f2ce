// The engine's seeded source of uniform numbers in [0, 1): the same seed gives the same sequence on every machine,
// so an engine fed the same requests at the same times makes the same draws.
export { seededRandom } from '../../shared/seeded-random.ts';
