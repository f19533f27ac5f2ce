import type { IConstruct } from 'constructs';

/**
 * One problem found while compiling a grid declaration. Rendered as
 * `<construct path>: <field>: <problem>. Fix: <fix>` so a user sees what, where and what to do in one line.
 */
export interface SynthIssue {
  /** The construct path (`east/providers/sim-a`), or the declaration path when no construct exists yet. */
  readonly path: string;
  /** The field inside that construct or resource (`spec.capacityWeight`). */
  readonly field: string;
  readonly problem: string;
  readonly fix: string;
}

export function formatIssue(issue: SynthIssue): string {
  const problem = issue.problem.replace(/[.\s]+$/u, '');
  return `${issue.path}: ${issue.field}: ${problem}. Fix: ${issue.fix}`;
}

/** The error synth fails with. Its message is the issue lines, one per problem, and nothing else. */
export class GridSynthError extends Error {
  /** The structured issues (empty when the problems came from construct validations as formatted lines). */
  readonly issues: readonly SynthIssue[];
  /** One formatted line per problem. */
  readonly lines: readonly string[];

  constructor(issues: readonly SynthIssue[], lines: readonly string[] = issues.map(formatIssue)) {
    super(lines.join('\n'));
    this.name = 'GridSynthError';
    this.issues = issues;
    this.lines = lines;
  }
}

/** Throws a GridSynthError when there is at least one issue. */
export function throwIfIssues(issues: readonly SynthIssue[]): void {
  if (issues.length > 0) throw new GridSynthError(issues);
}

/** The construct path as users see it in messages (the App root contributes nothing). */
export function constructPath(scope: IConstruct): string {
  return scope.node.path === '' ? scope.node.id : scope.node.path;
}

/** Builds an issue for a construct. */
export function issueAt(scope: IConstruct, field: string, problem: string, fix: string): SynthIssue {
  return { path: constructPath(scope), field, problem, fix };
}

/**
 * Registers a synth-time check whose issues are reported through `node.validate()` in the issue format. The
 * check runs when the grid is validated (before anything is written), so mutators called after construction count.
 */
export function addIssueCheck(scope: IConstruct, check: () => readonly SynthIssue[]): void {
  scope.node.addValidation({ validate: () => check().map(formatIssue) });
}
