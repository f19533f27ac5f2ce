// `node test/node/sweep.ts`: cleans up after node-suite runs whose process died without a teardown (see
// sweepStaleNodes in node-cluster.ts). run.sh calls it before and after the suite; it never touches a live run.
import { sweepStaleNodes } from './node-cluster.ts';

const cleaned = await sweepStaleNodes();
for (const dir of cleaned) process.stderr.write(`node sweep: cleaned up after a dead run in ${dir}\n`);
