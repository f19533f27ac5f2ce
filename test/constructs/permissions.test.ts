import { describe, expect, it } from 'vitest';
import { DAEMON_PERMISSIONS, GRID_PLURALS, policyRules } from '../../constructs/permissions.ts';
import { DEFINITIONS, KINDS } from '../../schemas/crds/definitions.ts';

describe('permission table', () => {
  it('covers exactly the six grid kinds of the CRDs', () => {
    expect([...GRID_PLURALS].sort()).toEqual(KINDS.map((kind) => DEFINITIONS[kind].plural).sort());
  });

  it('never grants a wildcard, deletes only discovered GridSite stubs, invite token Secrets, generated configs and named serving configs, and explains every entry', () => {
    const deletes: string[] = [];
    for (const entries of Object.values(DAEMON_PERMISSIONS)) {
      for (const entry of entries) {
        expect(entry.verbs as readonly string[]).not.toContain('*');
        expect(entry.resources).not.toContain('*');
        expect(entry.why.length).toBeGreaterThan(10);
        if ((entry.verbs as readonly string[]).includes('delete'))
          deletes.push(`${entry.resources.join(',')}:${entry.names}`);
      }
    }
    // Generated consumer configs: the named ConfigMap, and the content-hashed mount requirements (opt-in only);
    // serving configs by name, once gridServing is off.
    expect(deletes.sort()).toEqual([
      'configmaps:all',
      'configmaps:servingConfigMaps',
      'gridsites:all',
      'secrets:inviteSecrets',
    ]);
    expect(DAEMON_PERMISSIONS.gateway).toEqual([]);
    expect(DAEMON_PERMISSIONS.sim).toEqual([]);
  });

  it('drops a named rule whose slot has no names, instead of granting every object', () => {
    expect(policyRules('gossip-operator', 'namespace', {})).toEqual([]);
    expect(policyRules('gossip-operator', 'namespace', { inviteSecrets: [] })).toEqual([]);
    expect(policyRules('gossip-operator', 'namespace', { servingConfigMaps: [] })).toEqual([]);
    expect(policyRules('overlay-sync', 'namespace', { overlayConfigMap: [] })).toEqual([]);
  });

  it('grants the generated-config permissions only to a site whose gateways generate or delegate', () => {
    const configMapRules = (names: Parameters<typeof policyRules>[2]) =>
      policyRules('gossip-operator', 'namespace', names).filter(
        (r) => r.resources.includes('configmaps') || r.resources.includes('deployments'),
      );
    expect(
      configMapRules({ overlayConfigMaps: ['grid-overlay-grid-edge'] }).every((r) => r.resourceNames !== undefined),
    ).toBe(true);
    const generating = configMapRules({ praxisConfigMaps: ['praxis-edge'] });
    // One unnamed rule (the content-named requirements cannot be scoped); a named twin would add nothing.
    expect(generating).toEqual([
      { apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'patch', 'create', 'delete'] },
    ]);
    const delegated = policyRules('gossip-operator', 'namespace', {
      praxisConfigMaps: ['praxis-edge'],
      delegatedDeployments: ['inference-gw'],
    }).find((r) => r.resources.includes('deployments'));
    expect(delegated).toEqual({
      apiGroups: ['apps'],
      resources: ['deployments'],
      verbs: ['get', 'patch'],
      resourceNames: ['inference-gw'],
    });
  });

  it('sorts and deduplicates bound names', () => {
    const rules = policyRules('gossip-operator', 'namespace', { referencedSecrets: ['b', 'a', 'b'] });
    expect(rules.find((r) => r.resources.includes('secrets'))?.resourceNames).toEqual(['a', 'b']);
  });
});
