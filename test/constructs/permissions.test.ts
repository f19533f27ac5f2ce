import { describe, expect, it } from 'vitest';
import { DAEMON_PERMISSIONS, GRID_PLURALS, policyRules } from '../../constructs/permissions.ts';
import { DEFINITIONS, KINDS } from '../../schemas/crds/definitions.ts';

describe('permission table', () => {
  it('covers exactly the six grid kinds of the CRDs', () => {
    expect([...GRID_PLURALS].sort()).toEqual(KINDS.map((kind) => DEFINITIONS[kind].plural).sort());
  });

  it('never grants a wildcard, deletes only discovered GridSite stubs and invite token Secrets, and explains every entry', () => {
    const deletes: string[] = [];
    for (const entries of Object.values(DAEMON_PERMISSIONS)) {
      for (const entry of entries) {
        expect(entry.verbs as readonly string[]).not.toContain('*');
        expect(entry.resources).not.toContain('*');
        expect(entry.why.length).toBeGreaterThan(10);
        if ((entry.verbs as readonly string[]).includes('delete')) deletes.push(`${entry.resources.join(',')}:${entry.names}`);
      }
    }
    expect(deletes.sort()).toEqual(['gridsites:all', 'secrets:inviteSecrets']);
    expect(DAEMON_PERMISSIONS.gateway).toEqual([]);
    expect(DAEMON_PERMISSIONS.sim).toEqual([]);
  });

  it('drops a named rule whose slot has no names, instead of granting every object', () => {
    expect(policyRules('gossip-operator', 'namespace', {})).toEqual([]);
    expect(policyRules('gossip-operator', 'namespace', { inviteSecrets: [] })).toEqual([]);
    expect(policyRules('overlay-sync', 'namespace', { overlayConfigMap: [] })).toEqual([]);
  });

  it('sorts and deduplicates bound names', () => {
    const rules = policyRules('gossip-operator', 'namespace', { referencedSecrets: ['b', 'a', 'b'] });
    expect(rules.find((r) => r.resources.includes('secrets'))?.resourceNames).toEqual(['a', 'b']);
  });
});
