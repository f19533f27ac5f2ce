/**
 * docs/deploy.md's apply commands, which the node suite runs as they stand on two real clusters, also hold for what
 * the suite cannot show in one run: the prune removes every namespaced kind a site compiles to once the declaration
 * drops it (a kind missing from the allowlist would be left behind forever), and never a cluster-wide kind (a prune
 * of those reaches every namespace of the cluster, other grids' objects included).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { REPO_ROOT } from '../fixtures-path.ts';
import { blockForSite, deployBlocks, readDeployPage } from '../node/deploy-docs.ts';

const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition']);

type Manifest = { apiVersion: string; kind: string; metadata: { name: string; labels?: Record<string, string> } };

function compiled(file: string): Manifest[] {
  return parseAllDocuments(readFileSync(join(REPO_ROOT, 'dist', file), 'utf8'))
    .map((d) => d.toJS() as Manifest | null)
    .filter((m): m is Manifest => m !== null);
}

/** kubectl's allowlist form: group/version/Kind, with `core` for the core group. */
function allowlistEntry(m: Manifest): string {
  return `${m.apiVersion.includes('/') ? m.apiVersion : `core/${m.apiVersion}`}/${m.kind}`;
}

const blocks = deployBlocks(readDeployPage(REPO_ROOT));
const allowlist = new Set([...blocks.everySite.matchAll(/--prune-allowlist=(\S+)/gu)].map((m) => m[1] as string));
const selector = /--prune -l (\S+)/u.exec(blocks.everySite)?.[1];

describe('docs/deploy.md apply commands', () => {
  it('mark one block for every site and one per site of the example grid, for the node suite to run', () => {
    expect([...blocks.bySite.keys()].sort()).toEqual(['east', 'west']);
    expect(blockForSite(blocks, 'west')).toMatch(/^site=west$/mu);
    expect(blockForSite(blocks, 'west')).not.toMatch(/^site=east$/mu);
  });

  it.each(['east', 'west'])(
    'prune every namespaced kind dist/%s.k8s.yaml compiles to, and no cluster-wide kind',
    (site) => {
      const manifests = compiled(`${site}.k8s.yaml`);
      const namespaced = new Set(manifests.filter((m) => !CLUSTER_SCOPED.has(m.kind)).map(allowlistEntry));
      expect([...namespaced].filter((entry) => !allowlist.has(entry))).toEqual([]);
      expect([...allowlist].filter((entry) => CLUSTER_SCOPED.has(entry.split('/').at(-1) ?? ''))).toEqual([]);
    },
  );

  it.each(['east', 'west'])(
    'select with the prune only what every object of dist/%s.k8s.yaml carries (kubectl applies only what -l selects)',
    (site) => {
      expect(selector).toBe('app.kubernetes.io/managed-by=agn-constructs');
      const [key = '', value] = (selector ?? '').split('=');
      const unlabelled = compiled(`${site}.k8s.yaml`).filter((m) => m.metadata.labels?.[key] !== value);
      expect(unlabelled.map((m) => `${m.kind}/${m.metadata.name}`)).toEqual([]);
    },
  );

  it('refuse a page whose blocks are marked wrongly, naming the marker', () => {
    expect(() => deployBlocks('no blocks here')).toThrow(/no block marked/u);
    expect(() => deployBlocks('<!-- test/node runs this block somewhere -->\n```sh\nls\n```')).toThrow(
      /says "somewhere"/u,
    );
    expect(() => deployBlocks('<!-- test/node runs this block as it stands -->\n```sh\nls\n```')).toThrow(/site=east/u);
  });
});
