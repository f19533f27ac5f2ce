// Installs the Debian packages the image build needs, on a fresh machine as on this one:
// CI starts from a clean machine, so nothing installed by hand may be relied on. Quiet when all are present.
import { execFileSync, spawnSync } from 'node:child_process';

function installed(name: string): boolean {
  // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's own format syntax, not a template
  const query = spawnSync('dpkg-query', ['-W', '-f=${db:Status-Status}', name], { encoding: 'utf8' });
  return query.status === 0 && query.stdout.trim() === 'installed';
}

export function ensureDebianPackages(names: readonly string[]): void {
  const missing = names.filter((name) => !installed(name));
  if (missing.length === 0) return;
  process.stderr.write(`installing ${missing.join(' ')} from Debian\n`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['update', '-qq'], { stdio: ['ignore', 'ignore', 'inherit'], env });
  execFileSync('apt-get', ['install', '-y', '-qq', ...missing], { stdio: ['ignore', 'ignore', 'inherit'], env });
}
