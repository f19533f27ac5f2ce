import { describe, expect, it } from 'vitest';
import { Testing } from 'cdk8s';
import { GossipOperator, type GossipOperatorProps } from '../../constructs/gossip-operator.ts';
import { GridSiteStack } from '../../constructs/grid-site-stack.ts';
import { synthFailure } from './synth-failure.ts';
import { parseConfig } from '../../daemons/gossip-operator/config.ts';
import { chart, find, podSpec, site, synth, type Container, type Manifest } from './helpers.ts';

const base: GossipOperatorProps = {
  namespace: 'grid-system',
  network: 'demo',
  site: 'east',
  overlayConfigMaps: ['grid-overlay-demo-consumer-gateway'],
  referencedSecrets: [{ name: 'swim-key', namespace: 'grid-system' }],
};

const enrollment = { siteCertificateSecret: 'grid-site-cert', gridCaSecret: 'grid-ca-signing' } as const;

function render(extra: Partial<GossipOperatorProps>): Manifest[] {
  const c = chart();
  new GossipOperator(c, 'operator', { ...base, ...extra });
  return synth(c);
}

function container(
  objects: Manifest[],
): Container & { ports?: { containerPort: number; name?: string; protocol?: string }[] } {
  const found = podSpec(find(objects, 'Deployment', 'gossip-operator')).containers[0];
  if (found === undefined) throw new Error('no container');
  return found;
}

function env(objects: Manifest[]): Record<string, unknown> {
  return Object.fromEntries((container(objects).env ?? []).map((e) => [e.name, e.value ?? e.valueFrom]));
}

function servicePorts(objects: Manifest[]): [string, number, number][] {
  const service = find(objects, 'Service', 'gossip-operator') as unknown as {
    spec: { ports: { name: string; port: number; targetPort: number }[] };
  };
  return service.spec.ports.map((p) => [p.name, p.port, p.targetPort]);
}

/**
 * What the kubelet would start: the container's env with downward-API fields resolved as in a pod of namespace
 * `grid-system`, and the args after the daemon's script in its command.
 */
function daemonInput(objects: Manifest[]): { argv: string[]; env: Record<string, string> } {
  const c = container(objects);
  const resolved: Record<string, string> = {};
  for (const entry of c.env ?? []) {
    if (entry.value !== undefined) resolved[entry.name] = entry.value;
    else if (JSON.stringify(entry.valueFrom) === JSON.stringify({ fieldRef: { fieldPath: 'metadata.namespace' } }))
      resolved[entry.name] = 'grid-system';
    else throw new Error(`unresolvable env ${entry.name}`);
  }
  const command = c.command ?? [];
  expect(command.slice(0, 2)).toEqual(['node', 'daemons/gossip-operator/main.ts']);
  return { argv: [...command.slice(2), ...((c['args'] as string[] | undefined) ?? [])], env: resolved };
}

describe('GossipOperator opt-in listeners', () => {
  it('renders nothing new without the props (same objects as before, no listener variables)', () => {
    const before = render({});
    expect(Object.keys(env(before)).filter((name) => /SIGNALS|GATEWAY_AGE|ENROLLMENT|GRID_CA/u.test(name))).toEqual([]);
    expect(servicePorts(before).map(([name]) => name)).toEqual(['gossip-udp', 'gossip-tcp', 'metrics']);
    expect(container(before).volumeMounts).toEqual([{ name: 'tmp', mountPath: '/tmp' }]);
  });

  it('peerSignals: binds the signals endpoint, advertises the given address and adds a container and Service port', () => {
    const objects = render({ peerSignals: { advertise: 'signals.east.example.com:7950' } });
    expect(env(objects)).toMatchObject({
      GRID_SIGNALS_ADDRESS: '0.0.0.0:7950',
      GRID_SIGNALS_ADVERTISE: 'signals.east.example.com:7950',
    });
    expect(container(objects).ports).toContainEqual({ containerPort: 7950, name: 'signals' });
    expect(servicePorts(objects)).toContainEqual(['signals', 7950, 7950]);
    const custom = render({ peerSignals: { port: 8950 } });
    expect(env(custom)['GRID_SIGNALS_ADDRESS']).toBe('0.0.0.0:8950');
    expect(env(custom)).not.toHaveProperty('GRID_SIGNALS_ADVERTISE');
  });

  it('gatewayAgeIngest: a port of its own on the container and the Service', () => {
    const objects = render({ gatewayAgeIngest: { port: 7999 } });
    expect(env(objects)['GRID_GATEWAY_AGE_ADDRESS']).toBe('0.0.0.0:7999');
    expect(container(objects).ports).toContainEqual({ containerPort: 7999, name: 'gateway-age' });
    expect(servicePorts(objects)).toContainEqual(['gateway-age', 7999, 7999]);
    expect(env(render({ gatewayAgeIngest: {} }))['GRID_GATEWAY_AGE_ADDRESS']).toBe('0.0.0.0:7951');
  });

  it('gatewayAgeIngest: projects the ingest token Secret read-only as a directory (no subPath) and names its file', () => {
    const objects = render({ gatewayAgeIngest: {} });
    const pod = podSpec(find(objects, 'Deployment', 'gossip-operator'));
    expect(container(objects).volumeMounts).toEqual([
      { name: 'tmp', mountPath: '/tmp' },
      { name: 'ingest-token', mountPath: '/etc/grid/ingest-token', readOnly: true },
    ]);
    expect(pod.volumes?.find((v) => v.name === 'ingest-token')).toEqual({
      name: 'ingest-token',
      projected: {
        defaultMode: 0o440,
        sources: [{ secret: { name: 'grid-ingest-token', items: [{ key: 'token', path: 'token' }] } }],
      },
    });
    expect(env(objects)['GRID_INGEST_TOKEN_FILE']).toBe('/etc/grid/ingest-token/token');
    const custom = podSpec(
      find(render({ gatewayAgeIngest: { tokenSecret: 'site-ingest' } }), 'Deployment', 'gossip-operator'),
    );
    expect(JSON.stringify(custom.volumes)).toContain('"name":"site-ingest"');
    expect(synthFailure(() => render({ gatewayAgeIngest: { tokenSecret: 'Not_A_Name' } }))).toContain(
      'gatewayAgeIngest.tokenSecret: "Not_A_Name" is not a Secret name',
    );
  });

  it('enrollment: mounts the two Secrets read-only as projected directories (no subPath) and passes the file paths; RBAC is unchanged', () => {
    const objects = render({ enrollment: { ...enrollment, certificateLifetime: '720h' } });
    const pod = podSpec(find(objects, 'Deployment', 'gossip-operator'));
    expect(pod.containers).toHaveLength(1);
    expect(pod.initContainers ?? []).toEqual([]);
    const mounts = container(objects).volumeMounts ?? [];
    expect(mounts).toEqual([
      { name: 'tmp', mountPath: '/tmp' },
      { name: 'enrollment-site-certificate', mountPath: '/etc/grid/enrollment/site', readOnly: true },
      { name: 'enrollment-grid-ca', mountPath: '/etc/grid/enrollment/grid-ca', readOnly: true },
    ]);
    expect(mounts.some((m) => m.subPath !== undefined)).toBe(false);
    const volume = (name: string) => pod.volumes?.find((v) => v.name === name);
    const items = [
      { key: 'tls.crt', path: 'tls.crt' },
      { key: 'tls.key', path: 'tls.key' },
    ];
    expect(volume('enrollment-site-certificate')).toEqual({
      name: 'enrollment-site-certificate',
      projected: { defaultMode: 0o440, sources: [{ secret: { name: 'grid-site-cert', items } }] },
    });
    expect(volume('enrollment-grid-ca')).toEqual({
      name: 'enrollment-grid-ca',
      projected: { defaultMode: 0o440, sources: [{ secret: { name: 'grid-ca-signing', items } }] },
    });
    expect(env(objects)).toMatchObject({
      GRID_ENROLLMENT_ADDRESS: '0.0.0.0:9443',
      GRID_ENROLLMENT_TLS_CERT: '/etc/grid/enrollment/site/tls.crt',
      GRID_ENROLLMENT_TLS_KEY: '/etc/grid/enrollment/site/tls.key',
      GRID_CA_CERT: '/etc/grid/enrollment/grid-ca/tls.crt',
      GRID_CA_KEY: '/etc/grid/enrollment/grid-ca/tls.key',
      GRID_ENROLLMENT_CERT_LIFETIME: '720h',
    });
    expect(servicePorts(objects)).toContainEqual(['enrollment', 9443, 9443]);
    // The kubelet mounts the Secrets; the operator never reads them through the API, so its Roles do not change.
    const rbac = (list: Manifest[]) => list.filter((o) => o.kind === 'Role' || o.kind === 'ClusterRole');
    expect(rbac(objects)).toEqual(rbac(render({})));
    expect(JSON.stringify(rbac(objects))).not.toContain('grid-ca-signing');
  });

  it("the rendered env and args are accepted by the daemon's own parseConfig with the expected addresses", () => {
    const objects = render({
      peerSignals: { port: 7960, advertise: 'signals.east.example.com:443' },
      gatewayAgeIngest: { port: 7961 },
      enrollment: { ...enrollment, port: 9444, certificateLifetime: '48h' },
      gossipAdvertiseAddress: 'gossip.east.example.com:7946',
    });
    const input = daemonInput(objects);
    const config = parseConfig(input.argv, input.env);
    expect(config.site).toBe('east');
    expect(config.namespace).toBe('grid-system');
    expect(config.signalsAddress).toBe('0.0.0.0:7960');
    expect(config.signalsAdvertise).toBe('signals.east.example.com:443');
    expect(config.gatewayAgeAddress).toBe('0.0.0.0:7961');
    expect(config.enrollment).toEqual({
      address: '0.0.0.0:9444',
      tlsCertFile: '/etc/grid/enrollment/site/tls.crt',
      tlsKeyFile: '/etc/grid/enrollment/site/tls.key',
      caCertFile: '/etc/grid/enrollment/grid-ca/tls.crt',
      caKeyFile: '/etc/grid/enrollment/grid-ca/tls.key',
      certificateLifetimeMs: 48 * 3_600_000,
    });
    // Every path the daemon will open is under a directory the container mounts.
    const mounted = (container(objects).volumeMounts ?? []).map((m) => `${m.mountPath}/`);
    for (const file of [
      config.enrollment?.tlsCertFile,
      config.enrollment?.tlsKeyFile,
      config.enrollment?.caCertFile,
      config.enrollment?.caKeyFile,
    ]) {
      expect(mounted.some((dir) => file?.startsWith(dir))).toBe(true);
    }
    // And the defaults parse to listeners off.
    const off = daemonInput(render({}));
    const plain = parseConfig(off.argv, off.env);
    expect([plain.signalsAddress, plain.gatewayAgeAddress, plain.enrollment]).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
  });

  it('refuses bad ports, naming the prop', () => {
    expect(synthFailure(() => render({ peerSignals: { port: 0 } }))).toBe(
      'test/operator: peerSignals.port: 0 is not a port. Fix: use an integer from 1 to 65535, or omit it for the default',
    );
    expect(synthFailure(() => render({ gatewayAgeIngest: { port: 70000 } }))).toContain(
      'gatewayAgeIngest.port: 70000 is not a port',
    );
    expect(synthFailure(() => render({ enrollment: { ...enrollment, port: 94.5 } }))).toContain(
      'enrollment.port: 94.5 is not a port',
    );
  });

  it('refuses a port the operator already uses (SWIM, admin) or another listener has', () => {
    expect(synthFailure(() => render({ peerSignals: { port: 7946 } }))).toBe(
      "test/operator: peerSignals.port: port 7946 is already the operator's gossipPort (SWIM) port. Fix: give peerSignals.port a port of its own",
    );
    expect(synthFailure(() => render({ adminPort: 9100, gatewayAgeIngest: { port: 9100 } }))).toContain(
      "gatewayAgeIngest.port: port 9100 is already the operator's adminPort port",
    );
    const both = synthFailure(() =>
      render({
        peerSignals: { port: 8000 },
        gatewayAgeIngest: { port: 8000 },
        enrollment: { ...enrollment, port: 8000 },
      }),
    );
    expect(both.split('\n')).toEqual([
      "test/operator: gatewayAgeIngest.port: port 8000 is already the operator's peerSignals.port port. Fix: give gatewayAgeIngest.port a port of its own",
      "test/operator: enrollment.port: port 8000 is already the operator's peerSignals.port port. Fix: give enrollment.port a port of its own",
    ]);
    // The defaults do not collide with each other or with SWIM/admin.
    expect(() => render({ peerSignals: {}, gatewayAgeIngest: {}, enrollment })).not.toThrow();
  });

  it('refuses missing or malformed enrollment Secret names, one Secret for both, a bad lifetime and a bad advertise address', () => {
    const missing = synthFailure(() => render({ enrollment: { siteCertificateSecret: '', gridCaSecret: ' ' } }));
    expect(missing.split('\n')).toEqual([
      "test/operator: enrollment.siteCertificateSecret: no Secret name. Fix: name the Secret in the operator namespace that holds this site's certificate and key (tls.crt, tls.key)",
      'test/operator: enrollment.gridCaSecret: no Secret name. Fix: name the Secret in the operator namespace that holds the grid CA certificate and private key (tls.crt, tls.key)',
    ]);
    // A JavaScript caller can omit a required name; the message is the same.
    expect(synthFailure(() => render({ enrollment: { siteCertificateSecret: 'grid-site-cert' } as never }))).toContain(
      'enrollment.gridCaSecret: no Secret name',
    );
    expect(synthFailure(() => render({ enrollment: { ...enrollment, gridCaSecret: 'Grid_CA' } }))).toContain(
      'enrollment.gridCaSecret: "Grid_CA" is not a Secret name',
    );
    expect(synthFailure(() => render({ enrollment: { siteCertificateSecret: 'x', gridCaSecret: 'x' } }))).toContain(
      'enrollment.gridCaSecret: x is also the siteCertificateSecret',
    );
    for (const [lifetime, fault] of [
      ['30m', 'is below 1h'],
      ['8761h', 'is above 8760h'],
      ['2d', 'has the unknown unit "d"'],
      ['', 'is empty'],
      ['90s', 'is in s, which is not accepted here'],
    ]) {
      expect(synthFailure(() => render({ enrollment: { ...enrollment, certificateLifetime: lifetime } }))).toContain(
        `enrollment.certificateLifetime: "${lifetime}" ${fault}. Fix: use whole minutes (m) or hours (h) from 1h through 8760h, such as 2160h, or omit it for the daemon default`,
      );
    }
    for (const advertise of ['signals.example.com', 'signals.example.com:99999', 'a b:1']) {
      expect(synthFailure(() => render({ peerSignals: { advertise } }))).toContain(
        `peerSignals.advertise: "${advertise}" is not HOST:PORT`,
      );
    }
  });

  it('the site declaration passes the props through GridSiteStack, and its errors name the site operator', () => {
    const app = Testing.app();
    const stack = new GridSiteStack(app, 'east', {
      network: { name: 'net' },
      site: site('east', {
        providerGateway: undefined,
        peerSignals: { advertise: '203.0.113.5:7950' },
        gatewayAgeIngest: {},
        enrollment,
      }),
    });
    const objects = Testing.synth(stack) as Manifest[];
    expect(env(objects)).toMatchObject({
      GRID_SIGNALS_ADDRESS: '0.0.0.0:7950',
      GRID_SIGNALS_ADVERTISE: '203.0.113.5:7950',
      GRID_GATEWAY_AGE_ADDRESS: '0.0.0.0:7951',
      GRID_ENROLLMENT_ADDRESS: '0.0.0.0:9443',
    });
    expect(servicePorts(objects).map(([name]) => name)).toEqual([
      'gossip-udp',
      'gossip-tcp',
      'metrics',
      'signals',
      'gateway-age',
      'enrollment',
    ]);
    const plain = Testing.synth(
      new GridSiteStack(Testing.app(), 'east', {
        network: { name: 'net' },
        site: site('east', { providerGateway: undefined }),
      }),
    ) as Manifest[];
    expect(servicePorts(plain).map(([name]) => name)).toEqual(['gossip-udp', 'gossip-tcp', 'metrics']);
    expect(
      synthFailure(
        () =>
          new GridSiteStack(Testing.app(), 'east', {
            network: { name: 'net' },
            site: site('east', { providerGateway: undefined, enrollment: { ...enrollment, port: 9090 } }),
          }),
      ),
    ).toBe(
      "east/gossip-operator: enrollment.port: port 9090 is already the operator's adminPort port. Fix: give enrollment.port a port of its own",
    );
  });
});
