import { describe, expect, it } from 'vitest';
import {
  accessAllowed,
  discoveredSiteK8sName,
  labelsContain,
  localityTier,
  SiteIndex,
} from '../../daemons/routing/sites.ts';
import { NET, site } from './fixtures.ts';

describe('discoveredSiteK8sName', () => {
  // docs/contract.md §2.5: "each part lowercased, non [a-z0-9] → -, trimmed; joined {net}-{site}".
  it.each([
    ['production', 'site-b', 'production-site-b'],
    ['Prod', 'Site_B', 'prod-site-b'],
    ['prod', 'us.east:1', 'prod-us-east-1'],
    ['-net-', '__west__', 'net-west'],
    ['net', 'ŝite', 'net-ite'],
  ])('%s + %s → %s', (network, siteId, expected) => {
    expect(discoveredSiteK8sName(network, siteId)).toBe(expected);
  });
});

describe('SiteIndex', () => {
  const index = new SiteIndex(NET, [
    site(`${NET}-west`, { labels: { tier: 'gold' } }),
    site('east', { labels: { tier: 'gold', 'grid.praxis.fast/provider-site': 'east1' } }),
    site('other', { network: 'staging', labels: { tier: 'gold' } }),
  ]);

  it('matches remote records only by the auto-discovered name (seed 004 "The matching rule")', () => {
    expect(index.discovered('west')?.name).toBe(`${NET}-west`);
    expect(index.discovered('east')).toBeUndefined();
  });

  it('looks a site id up by discovered name, then by the id itself', () => {
    expect(index.lookup('west')?.name).toBe(`${NET}-west`);
    expect(index.lookup('east')?.name).toBe('east');
  });

  it('ignores GridSites of other networks', () => {
    expect(index.lookup('other')).toBeUndefined();
    expect(index.matching({ tier: 'gold' }).map((s) => s.name)).toEqual(['east', `${NET}-west`]);
  });

  it('resolves a siteSelector against labels (seed 000: provider-site label must match siteSelector.matchLabels)', () => {
    expect(index.matching({ 'grid.praxis.fast/provider-site': 'east1' }).map((s) => s.name)).toEqual(['east']);
    expect(index.matching({ 'grid.praxis.fast/provider-site': 'nowhere' })).toEqual([]);
  });
});

describe('access policy', () => {
  // docs/contract.md §2.5: "accessPolicy.siteSelector.matchLabels must be a subset of the consumer site's labels
  // (empty = all; unknown consumer site = deny unless empty)".
  const consumer = site('east', { labels: { 'grid.praxis.fast/site': 'cluster-a', env: 'prod' } });
  it.each([
    ['empty selector, known consumer', {}, consumer, true],
    ['absent selector, unknown consumer', undefined, undefined, true],
    ['empty selector, unknown consumer', {}, undefined, true],
    ['subset', { 'grid.praxis.fast/site': 'cluster-a' }, consumer, true],
    ['equal set', { 'grid.praxis.fast/site': 'cluster-a', env: 'prod' }, consumer, true],
    ['value differs', { 'grid.praxis.fast/site': 'cluster-b' }, consumer, false],
    ['key missing', { region: 'eu' }, consumer, false],
    ['non-empty selector, unknown consumer', { env: 'prod' }, undefined, false],
  ] as const)('%s → %s', (_label, selector, consumerSite, allowed) => {
    expect(accessAllowed(selector, consumerSite)).toBe(allowed);
  });

  it('does not treat inherited object keys as labels', () => {
    expect(labelsContain({}, { toString: 'x' } as Record<string, string>)).toBe(false);
  });
});

describe('localityTier', () => {
  // docs/contract.md §2.5: "same name → same_site; both regions equal → same_zone if zones equal, else same_region;
  // regions differ → cross_region; else unknown". Zone comparison requires a region match.
  const geo = (region?: string, zone?: string) =>
    site('x', { ...(region ? { region } : {}), ...(zone ? { zone } : {}) });
  it.each([
    ['same name without geography', 'a', undefined, 'a', undefined, 'same_site'],
    ['same region and zone', 'a', geo('us-east-1', 'a1'), 'b', geo('us-east-1', 'a1'), 'same_zone'],
    ['same region, other zone', 'a', geo('us-east-1', 'a1'), 'b', geo('us-east-1', 'a2'), 'same_region'],
    ['same region, zone missing', 'a', geo('us-east-1', 'a1'), 'b', geo('us-east-1'), 'same_region'],
    ['zone equal but region differs', 'a', geo('us-east-1', 'z'), 'b', geo('eu-west-1', 'z'), 'cross_region'],
    ['candidate has no region', 'a', geo('us-east-1'), 'b', geo(), 'unknown'],
    ['consumer unknown', 'a', undefined, 'b', geo('us-east-1'), 'unknown'],
    ['blank region', 'a', geo(' '), 'b', geo(' '), 'unknown'],
  ] as const)('%s → %s', (_label, consumerName, consumer, candidateName, candidate, tier) => {
    expect(localityTier(consumerName, consumer, candidateName, candidate)).toBe(tier);
  });
});

describe('own site geography', () => {
  // GridNetworkSpec.region/zone: "Region of this site (locality tier)".
  it('takes the own site region and zone from the GridNetwork when its GridSite has none', () => {
    const index = new SiteIndex(NET, [site('east'), site(`${NET}-west`, { region: 'us-east-1', zone: 'b' })], {
      site: 'east',
      region: 'us-east-1',
      zone: 'a',
    });
    const own = index.lookup('east');
    expect(own).toMatchObject({ name: 'east', region: 'us-east-1', zone: 'a' });
    expect(localityTier('east', own, 'west', index.lookup('west'))).toBe('same_region');
  });

  it('prefers the GridSite geography and synthesises a view when there is no GridSite', () => {
    const withSite = new SiteIndex(NET, [site('east', { region: 'eu-west-1' })], { site: 'east', region: 'us-east-1' });
    expect(withSite.lookup('east')?.region).toBe('eu-west-1');
    const without = new SiteIndex(NET, [], { site: 'east', region: 'us-east-1' });
    expect(without.lookup('east')).toEqual({
      name: 'east',
      network: NET,
      phase: 'Pending',
      labels: {},
      region: 'us-east-1',
    });
    expect(without.lookup('west')).toBeUndefined();
  });
});
