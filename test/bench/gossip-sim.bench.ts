// Gossip scale benchmark in simulated time (issue 22): the real membership code on a virtual clock and a seeded,
// lossy in-memory network (test/gossip/sim/), for sizes too large for the npm test budget. For each N and loss
// rate it prints one line: convergence, steady traffic per member, push-pull size, false positives, crash
// detection and the dissemination of a death and a join in gossip rounds (which should grow as O(log N)).
// Run: npm run bench:gossip-sim                 (N = 1000 and 5000 at 1 % loss)
//      npm run bench:gossip-sim -- 1000 2000     (other sizes; GOSSIP_SIM_LOSS=0.1 another loss rate)
import { describeFigures, runScale } from '../gossip/sim/scenario.ts';

const args = process.argv.slice(2);
if (args.includes('--help')) {
  process.stdout.write('usage: npm run bench:gossip-sim [-- N ...]   (env GOSSIP_SIM_LOSS, default 0.01)\n');
  process.exit(0);
}
const sizes = args.map(Number);
if (sizes.some((n) => !Number.isInteger(n) || n < 2)) {
  process.stderr.write(`bench:gossip-sim: sizes must be integers of at least 2, got ${args.join(' ')}\n`);
  process.exit(2);
}
const loss = Number(process.env.GOSSIP_SIM_LOSS ?? 0.01);
for (const n of sizes.length > 0 ? sizes : [1000, 5000]) console.log(describeFigures(await runScale(n, loss)));
