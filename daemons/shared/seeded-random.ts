// A seeded source of uniform numbers in [0, 1) (mulberry32): the same seed gives the same sequence on every machine,
// for the parts that draw (SWIM's member order, the sim's output lengths) and for tests and benches that replay draws.

/** Uniform in [0, 1). */
export type RandomSource = () => number;

export function seededRandom(seed: number): RandomSource {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
