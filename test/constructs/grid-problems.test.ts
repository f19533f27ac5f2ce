// A declaration with mistakes in several sites gets them all in one run (agn validate, synth), not one per attempt.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { gridProblems, synthGrid } from '../../constructs/grid.ts';
import { GridSynthError } from '../../constructs/synth-error.ts';
import { fakeTrust, simProvider, site, twoSiteGrid } from './helpers.ts';
import { synthFailure } from './synth-failure.ts';

const work = mkdtempSync(join(tmpdir(), 'agn-problems-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('gridProblems', () => {
  it('is empty for a declaration that compiles', () => {
    expect(gridProblems(twoSiteGrid())).toEqual([]);
  });

  it('lists the problems of every site: names, declaration rules, every resource schema rule, construct and validation checks', () => {
    const declaration = {
      network: { name: 'net' },
      trust: fakeTrust('net', ['a', 'b', 'lonely']),
      sites: [
        site('a', {
          consumerGateway: {},
          providers: [
            simProvider('pa', ['m1'], { capacityWeight: 0 }),
            simProvider('pa2', ['m1'], { healthCheck: { interval: '1m' } }),
          ],
        }),
        site('a'),
        site('crds'),
        // Built, then fails its operator's listener check: the other sites are still reported.
        site('b', {
          providers: [simProvider('pb', ['m2'])],
          peerSignals: { port: 0, advertise: 'signals.b.example.com:7950' },
        }),
        // Builds, but a provider gateway with nothing behind it fails the gateway config schema at validation.
        site('lonely'),
      ],
    };
    const problems = gridProblems(declaration);
    const lonely = problems.filter((line) => line.startsWith('lonely/'));
    expect(
      lonely.every((line) => line.startsWith('lonely/provider-gateway/Workload: praxis.yaml/filter_chains/0/filters/')),
    ).toBe(true);
    expect(problems.filter((line) => !line.startsWith('lonely/'))).toEqual([
      'a: name: site a is declared twice. Fix: give every site a distinct name',
      'crds: name: "crds" is the name of the CRD file. Fix: give every site a distinct name',
      'a/providers/pa: spec.capacityWeight: must be >= 1 (got 0). Fix: set capacityWeight to an integer from 1 to 1000 (omit it for weight 1)',
      'a/providers/pa2: spec.healthCheck.interval: must match ^([1-9][0-9]*s|[1-9][0-9]{3,}ms)$ (got "1m"). Fix: write the duration as whole seconds like 30s, or milliseconds of at least 1000ms',
      'b/gossip-operator: peerSignals.port: 0 is not a port. Fix: use an integer from 1 to 65535, or omit it for the default',
    ]);
    expect(lonely).toContainEqual(
      expect.stringMatching(
        /^lonely\/provider-gateway\/Workload: praxis\.yaml\/filter_chains\/0\/filters\/3\/routes: must NOT have fewer than 1 items/u,
      ),
    );
  });

  it('makes synthGrid throw the same lines and write nothing', () => {
    const declaration = twoSiteGrid({
      a: { providers: [simProvider('pa', ['m1'], { capacityWeight: 0 })] },
      b: { providers: [simProvider('pb', ['m1'], { capacityWeight: 5000 })] },
    });
    const out = join(work, 'out');
    const message = synthFailure(() => synthGrid(declaration, out));
    expect(message.split('\n')).toEqual(gridProblems(declaration));
    expect(message.split('\n')).toHaveLength(2);
    expect(existsSync(out)).toBe(false);
  });

  it('says a conflict between two sites once, though every site sees it', () => {
    const declaration = twoSiteGrid({ b: { providers: [simProvider('pa', ['m1'])] } });
    expect(gridProblems(declaration)).toEqual([
      'b/providers/pa: name: cluster pa is also served by site a (a/providers/pa); a consumer maps a cluster to one provider gateway. Fix: give this provider a distinct name or spec.routingClusterRef',
    ]);
    expect(() => synthGrid(declaration, join(work, 'conflict'))).toThrow(GridSynthError);
  });
});
