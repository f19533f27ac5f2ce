// The example grid app: `npx cdk8s synth` (cdk8s.yaml: `app: node constructs/main.ts`) compiles it into dist/,
// one file per site plus crds.k8s.yaml. The cdk8s CLI passes its output directory in CDK8S_OUTDIR.
import { exampleGrid } from './example-grid.ts';
import { synthGrid } from './grid.ts';
import { GridSynthError } from './synth-error.ts';

try {
  synthGrid(exampleGrid, process.env['CDK8S_OUTDIR'] ?? 'dist');
} catch (error) {
  if (!(error instanceof GridSynthError)) throw error;
  process.stderr.write(`synth failed, nothing was written:\n${error.message}\n`);
  process.exitCode = 1;
}
