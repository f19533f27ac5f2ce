// overlay-sync configuration: docs/contract.md §4 environment variables, matching flags (flag wins), defaults, and one
// clear error naming the variable or flag for each kind of bad input.

import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../daemons/overlay-sync/config.ts';

const BASE = { OVERLAY_SYNC_NAMESPACE: 'grid-system', OVERLAY_SYNC_CONFIGMAP: 'grid-overlay-glb-demo-edge' };

describe('overlay-sync config', () => {
  it('applies the SPEC defaults', () => {
    const config = parseConfig([], BASE);
    expect(config).toEqual({
      contract: 'overlay',
      namespace: 'grid-system',
      configMap: 'grid-overlay-glb-demo-edge',
      dataKey: 'routing-overlay.json',
      output: '/run/praxis-routing/routing-overlay.json',
      expectedScope: {},
      maxBytes: 1048576,
      healthAddr: '0.0.0.0:9091',
      once: false,
      store: { backend: 'kubernetes' },
    });
  });

  it('reads every SPEC variable, and flags override them', () => {
    const env = {
      ...BASE,
      OVERLAY_SYNC_DATA_KEY: 'routing-config.json',
      OVERLAY_SYNC_OUTPUT: '/tmp/x/overlay.json',
      OVERLAY_SYNC_EXPECTED_NETWORK: 'glb-demo',
      OVERLAY_SYNC_EXPECTED_GATEWAY: 'edge',
      OVERLAY_SYNC_EXPECTED_NAMESPACE: 'grid-system',
      OVERLAY_SYNC_EXPECTED_LOCAL_SITE: 'east-edge',
      OVERLAY_SYNC_MAX_BYTES: '2048',
      OVERLAY_SYNC_HEALTH_ADDR: '127.0.0.1:0',
      OVERLAY_SYNC_ONCE: 'true',
    };
    const config = parseConfig(
      ['--data-key', 'routing-overlay.json', '--store', 'local', '--state', '/tmp/state', '--manifests', 'dist'],
      env,
    );
    expect(config).toMatchObject({
      dataKey: 'routing-overlay.json',
      output: '/tmp/x/overlay.json',
      expectedScope: { network: 'glb-demo', gateway: 'edge', namespace: 'grid-system', local_site: 'east-edge' },
      maxBytes: 2048,
      healthAddr: '127.0.0.1:0',
      once: true,
      store: { backend: 'local', stateDir: '/tmp/state', manifestsDir: 'dist' },
    });
    expect(parseConfig(['--once'], BASE).once).toBe(true);
  });

  it('derives the ConfigMap name (docs/contract.md §2.1) and namespace from the expected scope', () => {
    const config = parseConfig([], {
      OVERLAY_SYNC_EXPECTED_NETWORK: 'glb-demo',
      OVERLAY_SYNC_EXPECTED_GATEWAY: 'glb-demo-edge-gateway',
      OVERLAY_SYNC_EXPECTED_NAMESPACE: 'grid-system',
    });
    expect(config.configMap).toBe('grid-overlay-glb-demo-glb-demo-edge-gateway');
    expect(config.namespace).toBe('grid-system');
  });

  it.each([
    [[], {}, /OVERLAY_SYNC_NAMESPACE \(--namespace\) is required/],
    [[], { OVERLAY_SYNC_NAMESPACE: 'ns' }, /OVERLAY_SYNC_CONFIGMAP \(--configmap\) is required/],
    [[], { ...BASE, OVERLAY_SYNC_MAX_BYTES: '0' }, /OVERLAY_SYNC_MAX_BYTES: "0" must be an integer from 1/],
    [[], { ...BASE, OVERLAY_SYNC_MAX_BYTES: '1e6' }, /OVERLAY_SYNC_MAX_BYTES: "1e6"/],
    [['--max-bytes=-5'], BASE, /--max-bytes: "-5"/],
    [
      [],
      { ...BASE, OVERLAY_SYNC_HEALTH_ADDR: 'localhost' },
      /OVERLAY_SYNC_HEALTH_ADDR: invalid listen address "localhost"/,
    ],
    [[], { ...BASE, OVERLAY_SYNC_ONCE: 'maybe' }, /OVERLAY_SYNC_ONCE: "maybe" is not a boolean/],
    [
      [],
      { ...BASE, OVERLAY_SYNC_CONFIGMAP: 'Bad_Name' },
      /OVERLAY_SYNC_CONFIGMAP: "Bad_Name" is not a valid ConfigMap name/,
    ],
    [[], { ...BASE, OVERLAY_SYNC_DATA_KEY: 'a/b' }, /OVERLAY_SYNC_DATA_KEY: "a\/b" is not a valid ConfigMap data key/],
    [[], { ...BASE, OVERLAY_SYNC_OUTPUT: '/run/dir/' }, /names a directory/],
    [['--store', 'etcd'], BASE, /--store: "etcd" is not a store; use kubernetes or local/],
    [['--store', 'local'], BASE, /--store local needs --state DIR/],
    [['--bogus'], BASE, /Unknown option '--bogus'[\s\S]*usage: overlay-sync/],
    [
      [],
      { ...BASE, OVERLAY_SYNC_NAMESPACE: ' grid-system' },
      /OVERLAY_SYNC_NAMESPACE: " grid-system" has surrounding whitespace/,
    ],
  ])('rejects %j %j', (argv, env, message) => {
    expect(() => parseConfig(argv as string[], env as Record<string, string>)).toThrow(ConfigError);
    expect(() => parseConfig(argv as string[], env as Record<string, string>)).toThrow(message);
  });
});
