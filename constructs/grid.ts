import type { IConstruct } from 'constructs';
import { App, Chart } from 'cdk8s';
import { GridCrds } from './grid-crds.ts';
import type { GridDeclaration } from './grid-declaration.ts';
import { GridSiteStack } from './grid-site-stack.ts';
import { DEFAULT_IMAGE, imageReferenceIssues } from './image-reference.ts';
import { LABEL_MANAGED_BY } from './labels.ts';
import { GridSynthError, throwIfIssues, type SynthIssue } from './synth-error.ts';

/** The chart id (and dist/ file name) of the CRDs; a site may not use it as its name. */
export const CRDS_CHART_ID = 'crds';

export interface BuiltGrid {
  readonly crds: Chart;
  readonly sites: readonly GridSiteStack[];
}

/**
 * Builds a whole grid into an App: one chart with the six CRDs, one GridSiteStack per site (each site's peers
 * are all the other sites). Problems found while building throw at once; nothing has been written yet.
 */
export function buildGrid(app: App, declaration: GridDeclaration): BuiltGrid {
  const issues: SynthIssue[] = [];
  const seen = new Set<string>();
  for (const site of declaration.sites) {
    if (site.name === CRDS_CHART_ID || seen.has(site.name)) {
      issues.push({
        path: site.name,
        field: 'name',
        problem: site.name === CRDS_CHART_ID ? `"${CRDS_CHART_ID}" is the name of the CRD file` : `site ${site.name} is declared twice`,
        fix: 'give every site a distinct name',
      });
    }
    seen.add(site.name);
  }
  issues.push(...imageReferenceIssues(declaration.image ?? DEFAULT_IMAGE, 'declaration'));
  throwIfIssues(issues);
  const crds = new Chart(app, CRDS_CHART_ID, { labels: { [LABEL_MANAGED_BY]: 'agn-constructs' } });
  new GridCrds(crds, 'grid');
  const sites = declaration.sites.map(
    (site) =>
      new GridSiteStack(app, site.name, {
        network: declaration.network,
        site,
        peers: declaration.sites.filter((other) => other !== site),
        ...(declaration.image === undefined ? {} : { image: declaration.image }),
      }),
  );
  return { crds, sites };
}

/**
 * Runs every construct's synth-time validation and throws one GridSynthError listing all problems. cdk8s
 * validates too, but only after it has created the output directory; calling this first keeps a failed synth
 * from writing anything.
 */
export function validateGrid(root: IConstruct): void {
  const lines: string[] = [];
  for (const construct of root.node.findAll()) lines.push(...construct.node.validate());
  if (lines.length > 0) throw new GridSynthError([], lines);
}

/** Builds, validates, then synthesizes: the only entry point the example app needs. */
export function synthGrid(declaration: GridDeclaration, outdir: string): BuiltGrid {
  const app = new App({ outdir });
  const built = buildGrid(app, declaration);
  validateGrid(app);
  app.synth();
  return built;
}
