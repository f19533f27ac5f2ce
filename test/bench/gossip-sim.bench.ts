// Gossip scale benchmark in simulated time: the real membership code on a virtual clock and a seeded,
// lossy in-memory network (test/gossip/sim/), for sizes too large for the npm test budget. For each N and loss
// rate it prints one line: steady traffic per member, push-pull size, false positives, crash detection and the
// dissemination of a death and a join in gossip rounds (which should grow as O(log N)). Grids start converged
// (every member holding the full member list); --join-storm replays the join of all N through one seed instead
// (O(N^2) packets: a few hundred members at most).
// Run: npm run bench:gossip-sim                          (N = 1000 and 5000 at 1 % loss)
//      npm run bench:gossip-sim -- 100 300 --loss 0.1    (other sizes and loss rate)
// 5,000 members hold 25 million member entries between them: give Node room (NODE_OPTIONS=--max-old-space-size=8192).
import { describeFigures, runScale } from '../gossip/sim/scenario.ts';

const usage = 'usage: npm run bench:gossip-sim [-- N ...] [--loss FRACTION] [--join-storm]\n';
const args = process.argv.slice(2);
if (args.includes('--help')) {
  process.stdout.write(usage);
  process.exit(0);
}
let loss = 0.01;
let start: 'converged' | 'join-storm' = 'converged';
const sizes: number[] = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i] as string;
  if (a === '--loss') {
    loss = Number(args[++i]);
    if (!(loss >= 0 && loss < 1)) {
      process.stderr.write(`bench:gossip-sim: --loss must be a fraction from 0 to below 1, got ${String(args[i])}\n`);
      process.exit(2);
    }
  } else if (a === '--join-storm') start = 'join-storm';
  else if (/^\d+$/.test(a) && Number(a) >= 2) sizes.push(Number(a));
  else {
    process.stderr.write(`bench:gossip-sim: ${a} is not a size (an integer of at least 2) or an option; ${usage}`);
    process.exit(2);
  }
}
console.log(`gossip-sim bench: ${new Date().toISOString()}, node ${process.version}`);
for (const n of sizes.length > 0 ? sizes : [1000, 5000]) {
  const f = await runScale(n, loss, { start });
  console.log(describeFigures(f));
  console.log(JSON.stringify(f));
}
