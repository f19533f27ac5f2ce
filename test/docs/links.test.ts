/**
 * The documentation's links and commands hold: every relative link in README.md, BENCHMARKS.md, docs/ and the
 * folders' READMEs names a file that exists and, with a #fragment, a heading that file has; every `npm run` names a
 * script of package.json and every `agn` command line names a command and flags that `agn --help` lists. A page that
 * sends a reader to a moved section or a renamed flag fails here instead of in a user's terminal.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../fixtures-path.ts';

const SKIPPED_DIRS = new Set(['node_modules', 'dist', '.git', 'fixtures']);

function markdownFiles(dir: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(dir)) {
    if (SKIPPED_DIRS.has(entry)) continue;
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) found.push(...markdownFiles(path));
    else if (entry.endsWith('.md')) found.push(path);
  }
  return found;
}

const DOCS = markdownFiles(REPO_ROOT)
  .map((path) => relative(REPO_ROOT, path))
  .sort();

/** Text outside fenced code blocks, where a `[x](y)` is a link and not an example. */
function prose(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
}

/** The code blocks' lines, where commands are. */
function codeLines(markdown: string): string[] {
  const lines: string[] = [];
  for (const block of markdown.matchAll(/^(```|~~~)[^\n]*\n([\s\S]*?)^\1/gm))
    lines.push(...(block[2] ?? '').split('\n'));
  return lines;
}

/** GitHub's heading anchors: lower case, punctuation other than '-' and '_' dropped, spaces to '-', repeats numbered. */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const match of prose(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const text = (match[1] ?? '').replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/<[^>]+>/g, '');
    const slug = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  for (const match of markdown.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) anchors.add(match[1] ?? '');
  return anchors;
}

interface Link {
  readonly doc: string;
  readonly target: string;
}

function relativeLinks(doc: string): Link[] {
  const text = prose(readFileSync(join(REPO_ROOT, doc), 'utf8')).replace(/`[^`\n]*`/g, '');
  const links: Link[] = [];
  for (const match of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
    const target = match[1] ?? '';
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
    links.push({ doc, target });
  }
  return links;
}

function brokenLink({ doc, target }: Link): string | undefined {
  const [pathPart = '', fragment] = target.split('#', 2);
  const file =
    pathPart === '' ? join(REPO_ROOT, doc) : resolve(dirname(join(REPO_ROOT, doc)), decodeURIComponent(pathPart));
  if (!file.startsWith(REPO_ROOT)) return `${doc}: ${target} points outside the repository`;
  if (!existsSync(file)) return `${doc}: ${target}: no such file ${relative(REPO_ROOT, file)}`;
  if (fragment === undefined || fragment === '') return undefined;
  if (!file.endsWith('.md'))
    return /^L\d+(-L\d+)?$/.test(fragment)
      ? undefined
      : `${doc}: ${target}: a #fragment on a file that is not markdown`;
  const anchors = headingAnchors(readFileSync(file, 'utf8'));
  return anchors.has(decodeURIComponent(fragment))
    ? undefined
    : `${doc}: ${target}: ${relative(REPO_ROOT, file)} has no heading #${fragment}`;
}

describe('documentation links', () => {
  it('finds the front door and the docs pages', () => {
    expect(DOCS).toContain('README.md');
    expect(DOCS).toContain('BENCHMARKS.md');
    expect(DOCS.filter((doc) => doc.startsWith('docs/')).length).toBeGreaterThan(0);
  });

  it('every relative link names a file that exists and a heading it has', () => {
    const broken = DOCS.flatMap(relativeLinks)
      .map(brokenLink)
      .filter((problem) => problem !== undefined);
    expect(broken).toEqual([]);
  });

  it('the checker itself catches a missing file, a missing heading and a page outside the repository', () => {
    expect(brokenLink({ doc: 'README.md', target: 'docs/no-such-page.md' })).toContain(
      'no such file docs/no-such-page.md',
    );
    expect(brokenLink({ doc: 'README.md', target: 'BENCHMARKS.md#no-such-heading' })).toContain(
      'has no heading #no-such-heading',
    );
    expect(brokenLink({ doc: 'README.md', target: '../../etc/passwd' })).toContain('points outside the repository');
    expect(headingAnchors('# Deploy to a cluster\n## `agn pki` (PKI)\n## Deploy to a cluster\n')).toEqual(
      new Set(['deploy-to-a-cluster', 'agn-pki-pki', 'deploy-to-a-cluster-1']),
    );
  });
});

const SCRIPTS = Object.keys(
  (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts,
);

/** Each `agn` command's words and the flags its usage line names, from the help the CLI prints. */
const AGN_COMMANDS = execFileSync(process.execPath, [join(REPO_ROOT, 'daemons/cli/agn.ts'), '--help'], {
  encoding: 'utf8',
})
  .split('\n')
  .flatMap((line) => {
    const match = /^ {2}agn ((?:[a-z][a-z-]*)(?: [a-z][a-z-]*)?)(.*?) {2}- {2}/.exec(line);
    return match ? [{ words: match[1] ?? '', flags: new Set((match[2] ?? '').match(/--[a-z][a-z-]*/g) ?? []) }] : [];
  });

/** A command line's invocation of agn, however the docs spell it, without the words before it. */
function agnInvocation(line: string): string | undefined {
  const match =
    /(?:^|[\s;&|(])(?:npx agn|agn|node daemons\/cli\/agn\.ts|npx node daemons\/cli\/agn\.ts)\s+([^|;&#>]*)/.exec(line);
  return match ? (match[1] ?? '').trim() : undefined;
}

function badCommand(doc: string, line: string): string | undefined {
  const script = /\bnpm run ([a-z][\w:-]*)/.exec(line)?.[1];
  if (script !== undefined && !SCRIPTS.includes(script))
    return `${doc}: \`${line.trim()}\`: package.json has no script ${script}`;
  const invocation = agnInvocation(line);
  if (invocation === undefined || invocation === '' || invocation.startsWith('--help')) return undefined;
  const words = invocation.split(/\s+/);
  const command =
    AGN_COMMANDS.find((c) => c.words === words.slice(0, 2).join(' ')) ?? AGN_COMMANDS.find((c) => c.words === words[0]);
  if (command === undefined) return `${doc}: \`${line.trim()}\`: agn has no command ${words.slice(0, 2).join(' ')}`;
  const unknown = words
    .filter((word) => word.startsWith('--'))
    .map((word) => word.split('=')[0] ?? word)
    .filter((flag) => flag !== '--help' && !command.flags.has(flag));
  return unknown.length > 0
    ? `${doc}: \`${line.trim()}\`: agn ${command.words} takes no ${unknown.join(', ')}`
    : undefined;
}

describe('documentation commands', () => {
  it('reads the commands agn lists', () => {
    expect(AGN_COMMANDS.map((c) => c.words)).toEqual(
      expect.arrayContaining(['up', 'synth', 'overlay verify', 'pki secrets', 'site enroll']),
    );
    expect(AGN_COMMANDS.find((c) => c.words === 'pki secrets')?.flags).toEqual(new Set(['--site', '--dir']));
  });

  it('every npm run names a script and every agn line a command and its flags', () => {
    const problems = DOCS.flatMap((doc) =>
      codeLines(readFileSync(join(REPO_ROOT, doc), 'utf8')).map((line) => badCommand(doc, line)),
    ).filter((problem) => problem !== undefined);
    expect(problems).toEqual([]);
  });

  it('the checker catches an unknown script, command and flag', () => {
    expect(badCommand('README.md', 'npm run bench:nothing')).toContain('package.json has no script bench:nothing');
    expect(badCommand('README.md', 'npx agn frobnicate x')).toContain('agn has no command frobnicate');
    expect(badCommand('README.md', 'agn pki secrets --site east --force | kubectl apply -f -')).toContain(
      'agn pki secrets takes no --force',
    );
    expect(badCommand('README.md', 'agn pki secrets --site east --dir .pki | kubectl apply -f -')).toBeUndefined();
  });
});
