import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../daemons/gossip-operator/config.ts';
import { thrownMessage } from '../thrown.ts';

const KEY = 'ab'.repeat(32);

describe('operator configuration', () => {
  it('reads flags over environment, with defaults', () => {
    const c = parseConfig(
      ['--store', 'local', '--state', '/s', '--manifests', '/m', '--site', 'site-a', '--gossip-bind', '127.0.0.1:0'],
      {
        GRID_SITE_NAME: 'ignored',
        GRID_SWIM_ENCRYPT_KEY: KEY,
        GRID_GATEWAY_ADDRESS: '10.0.0.4:8443',
        GRID_SWIM_SEEDS: '10.0.0.5:7946, [::1]:7946',
      },
    );
    expect(c.store).toEqual({ backend: 'local', stateDir: '/s', manifestsDir: '/m' });
    expect(c.site).toBe('site-a');
    expect(c.gossipBind).toEqual({ host: '127.0.0.1', port: 0 });
    expect(c.swimKey?.toString('hex')).toBe(KEY);
    expect(c.gatewayAddress).toBe('10.0.0.4:8443');
    expect(c.seeds).toEqual(['10.0.0.5:7946', '[::1]:7946']);
    expect(c.adminAddress).toBe('0.0.0.0:9090');
    expect(c.leaderElection).toBe(true);
    expect(c.leaseName).toBe('gossip-operator-leader');
    expect(parseConfig(['--site', 'x'], {}).store).toEqual({ backend: 'kubernetes' });
  });

  it("names the metrics scraper ServiceAccount (default gossip-operator-metrics-scraper, the construct's name) and refuses a bad name", () => {
    expect(parseConfig(['--site', 'x'], {}).metricsScraperServiceAccount).toBe('gossip-operator-metrics-scraper');
    expect(
      parseConfig(['--site', 'x'], { GRID_METRICS_SCRAPER_SERVICE_ACCOUNT: 'epp-scraper' })
        .metricsScraperServiceAccount,
    ).toBe('epp-scraper');
    expect(
      parseConfig(['--site', 'x', '--metrics-scraper-service-account', 'flag-wins'], {
        GRID_METRICS_SCRAPER_SERVICE_ACCOUNT: 'epp-scraper',
      }).metricsScraperServiceAccount,
    ).toBe('flag-wins');
    expect(() => parseConfig(['--site', 'x', '--metrics-scraper-service-account', 'Bad_Name'], {})).toThrow(
      '--metrics-scraper-service-account (env GRID_METRICS_SCRAPER_SERVICE_ACCOUNT): "Bad_Name" is not a ServiceAccount name',
    );
  });

  it('names the flag and what is expected, never echoing the SWIM key', () => {
    const fail = (argv: string[], env: NodeJS.ProcessEnv = {}) =>
      thrownMessage(() => parseConfig(argv, env), ConfigError);
    expect(fail([])).toContain('--site (env GRID_SITE_NAME) is required');
    expect(fail(['--site', 'a', '--store', 'local'])).toContain('--store local needs --state DIR');
    expect(fail(['--site', 'a', '--store', 'etcd'])).toContain('must be kubernetes or local');
    expect(fail(['--site', 'a b'])).toContain('must be 1-63 letters');
    expect(fail(['--site', 'a', '--gossip-bind', 'nope'])).toContain('--gossip-bind (env GRID_GOSSIP_BIND)');
    expect(fail(['--site', 'a', '--lease-duration', '5 minutes'])).toContain('--lease-duration');
    expect(fail(['--site', 'a', '--bogus'])).toContain("Unknown option '--bogus'");
    const badKey = 'zz'.repeat(32);
    const message = fail(['--site', 'a'], { GRID_SWIM_ENCRYPT_KEY: badKey });
    expect(message).toContain('GRID_SWIM_ENCRYPT_KEY');
    expect(message).not.toContain(badKey);
  });

  it('chooses the dashboard access: off on a public admin bind, open on loopback, token only with its file', () => {
    const dashboard = (argv: string[], env: NodeJS.ProcessEnv = {}) =>
      parseConfig(['--site', 'x', ...argv], env).dashboard;
    expect(dashboard([])).toEqual({ access: 'off' });
    expect(dashboard(['--admin', ':9090'])).toEqual({ access: 'off' });
    expect(dashboard(['--admin', '[::]:9090'])).toEqual({ access: 'off' });
    expect(dashboard(['--admin', '10.0.0.4:9090'])).toEqual({ access: 'off' });
    expect(dashboard(['--admin', '127.0.0.1:9090'])).toEqual({ access: 'open' });
    expect(dashboard(['--admin', '127.0.3.1:9090'])).toEqual({ access: 'open' });
    expect(dashboard(['--admin', '[::1]:9090'])).toEqual({ access: 'open' });
    expect(dashboard(['--admin', 'localhost:9090'])).toEqual({ access: 'open' });
    expect(dashboard(['--admin', '127.0.0.1:9090', '--dashboard', 'off'])).toEqual({ access: 'off' });
    expect(dashboard([], { GRID_DASHBOARD: 'open' })).toEqual({ access: 'open' });
    expect(
      dashboard([], { GRID_DASHBOARD: 'token', GRID_DASHBOARD_TOKEN_FILE: '/etc/grid/dashboard-token/token' }),
    ).toEqual({ access: 'token', tokenFile: '/etc/grid/dashboard-token/token' });
    expect(dashboard(['--dashboard', 'off'], { GRID_DASHBOARD: 'open' })).toEqual({ access: 'off' });
    const fail = (argv: string[], env: NodeJS.ProcessEnv = {}) =>
      thrownMessage(() => parseConfig(['--site', 'x', ...argv], env), ConfigError);
    expect(fail(['--dashboard', 'public'])).toBe(
      '--dashboard (env GRID_DASHBOARD): "public" must be off, open or token',
    );
    expect(fail(['--dashboard', 'token'])).toBe(
      '--dashboard (env GRID_DASHBOARD): token needs --dashboard-token-file FILE (env GRID_DASHBOARD_TOKEN_FILE), the file holding the token',
    );
    expect(fail(['--dashboard-token-file', '/t'])).toBe(
      '--dashboard-token-file (env GRID_DASHBOARD_TOKEN_FILE) is read only with --dashboard token; set --dashboard (env GRID_DASHBOARD) to token',
    );
    expect(fail(['--dashboard', 'open'], { GRID_DASHBOARD_TOKEN_FILE: '/t' })).toContain(
      'is read only with --dashboard token',
    );
  });
});
