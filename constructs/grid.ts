import type { IConstruct } from 'constructs';
import { App, Chart } from 'cdk8s';
import { GridCrds } from './grid-crds.ts';
import type { GridDeclaration, SiteDeclaration } from './grid-declaration.ts';
import { GridSiteStack } from './grid-site-stack.ts';
import { DEFAULT_IMAGE, imageReferenceIssues } from './image-reference.ts';
import { LABEL_MANAGED_BY, LABEL_VERSION } from './labels.ts';
import { PACKAGE_VERSION } from './package-version.ts';
import { formatIssue, GridSynthError, type SynthIssue } from './synth-error.ts';
import { checkGridTrust } from '../schemas/pki/validate.ts';
import { gridTrustIssues } from './site-reachability.ts';

export interface GridBuildOptions {
  /** Refuse peers without certificate pins (`agn pki init` builds without, to learn what to issue). @default true */
  readonly checkPins?: boolean;
}

/** The chart id (and dist/ file name) of the CRDs; a site may not use it as its name. */
export const CRDS_CHART_ID = 'crds';

export interface BuiltGrid {
  readonly crds: Chart;
  readonly sites: readonly GridSiteStack[];
}

/** A built grid and every problem found while building it (one formatted line each, duplicates dropped). */
interface CompiledGrid extends BuiltGrid {
  readonly issues: readonly SynthIssue[];
  readonly lines: readonly string[];
}

/**
 * Builds what can be built and collects every problem instead of stopping at the first: a site that fails is
 * reported and left out of the App, and the other sites are still built, so one run names every mistake.
 */
function compileGrid(app: App, declaration: GridDeclaration, options: GridBuildOptions = {}): CompiledGrid {
  const issues: SynthIssue[] = [];
  const lines: string[] = [];
  const seen = new Set<string>();
  const buildable: SiteDeclaration[] = [];
  for (const site of declaration.sites) {
    if (site.name === CRDS_CHART_ID || seen.has(site.name)) {
      const issue = {
        path: site.name,
        field: 'name',
        problem:
          site.name === CRDS_CHART_ID
            ? `"${CRDS_CHART_ID}" is the name of the CRD file`
            : `site ${site.name} is declared twice`,
        fix: 'give every site a distinct name',
      };
      issues.push(issue);
      lines.push(formatIssue(issue));
    } else {
      buildable.push(site);
    }
    seen.add(site.name);
  }
  const trustChecked = declaration.trust === undefined ? undefined : checkGridTrust(declaration.trust);
  const trustShape: SynthIssue[] =
    trustChecked === undefined || trustChecked.ok
      ? []
      : [
          {
            path: 'declaration',
            field: 'trust',
            problem: trustChecked.error,
            fix: 'pass the grid-trust.json that `agn pki init` wrote, unedited',
          },
        ];
  // A malformed trust file says nothing reliable about pins: report it alone, not a missing pin per site as well.
  const trust = trustShape.length > 0 ? undefined : declaration.trust;
  for (const issue of [
    ...imageReferenceIssues(declaration.image ?? DEFAULT_IMAGE, 'declaration'),
    ...trustShape,
    ...gridTrustIssues(declaration),
  ]) {
    issues.push(issue);
    lines.push(formatIssue(issue));
  }
  // The CRDs carry the package version: the daemons of that version (the image tag) are the ones that serve them.
  const crds = new Chart(app, CRDS_CHART_ID, {
    labels: { [LABEL_MANAGED_BY]: 'agn-constructs', [LABEL_VERSION]: PACKAGE_VERSION },
  });
  new GridCrds(crds, 'grid');
  const sites: GridSiteStack[] = [];
  for (const site of buildable) {
    try {
      sites.push(
        new GridSiteStack(app, site.name, {
          network: declaration.network,
          site,
          // A site with a refused name is no peer either: a second `a` would clash with the first in every stack.
          peers: buildable.filter((other) => other !== site),
          ...(declaration.image === undefined ? {} : { image: declaration.image }),
          ...(declaration.observability === undefined ? {} : { observability: declaration.observability }),
          ...(trust === undefined ? {} : { trust }),
          checkPins: options.checkPins !== false && trustShape.length === 0,
        }),
      );
    } catch (error) {
      if (!(error instanceof GridSynthError)) throw error;
      issues.push(...error.issues);
      lines.push(...error.lines);
      app.node.tryRemoveChild(site.name);
    }
  }
  return { crds, sites, issues, lines: [...new Set(lines)] };
}

/**
 * Builds a whole grid into an App: one chart with the six CRDs, one GridSiteStack per site (each site's peers
 * are all the other sites). Every problem found while building is thrown at once; nothing has been written yet.
 */
export function buildGrid(app: App, declaration: GridDeclaration, options: GridBuildOptions = {}): BuiltGrid {
  const { crds, sites, issues, lines } = compileGrid(app, declaration, options);
  if (lines.length > 0) throw new GridSynthError(issues, lines);
  return { crds, sites };
}

function validationLines(root: IConstruct): string[] {
  return root.node.findAll().flatMap((construct) => construct.node.validate());
}

/**
 * Runs every construct's synth-time validation and throws one GridSynthError listing all problems. cdk8s
 * validates too, but only after it has created the output directory; calling this first keeps a failed synth
 * from writing anything.
 */
export function validateGrid(root: IConstruct): void {
  const lines = validationLines(root);
  if (lines.length > 0) throw new GridSynthError([], lines);
}

/**
 * Every problem of a declaration, one line each (`<site or construct path>: <field>: <problem>. Fix: <fix>`), empty
 * when it compiles: the build problems of every site and the synth-time validations of the sites that built. Writes
 * nothing; `agn validate` prints these.
 */
export function gridProblems(declaration: GridDeclaration): string[] {
  const app = new App();
  const { lines } = compileGrid(app, declaration);
  return [...new Set([...lines, ...validationLines(app)])];
}

/** Builds, validates, then synthesizes: the only entry point a grid app needs. Throws every problem at once. */
export function synthGrid(declaration: GridDeclaration, outdir: string): BuiltGrid {
  const app = new App({ outdir });
  const { crds, sites, issues, lines } = compileGrid(app, declaration);
  const all = [...new Set([...lines, ...validationLines(app)])];
  if (all.length > 0) throw new GridSynthError(issues, all);
  app.synth();
  return { crds, sites };
}
