// The operator flags of the peer signals endpoint, the gateway age ingest and the poll interval.
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../../daemons/gossip-operator/config.ts';

const base = ['--site', 'site-a'];

describe('signal flags', () => {
  it('leaves both listeners off and polls every 10 s by default', () => {
    const config = parseConfig(base, {});
    expect(config.signalsAddress).toBeUndefined();
    expect(config.gatewayAgeAddress).toBeUndefined();
    expect(config.peerPollIntervalMs).toBe(10_000);
  });

  it('takes flags over environment variables', () => {
    const config = parseConfig([...base, '--signals-address', '0.0.0.0:9443', '--peer-poll-interval', '2s'], {
      GRID_SIGNALS_ADDRESS: '127.0.0.1:1',
      GRID_SIGNALS_ADVERTISE: '10.0.0.5:9443',
      GRID_GATEWAY_AGE_ADDRESS: '0.0.0.0:9444',
      GRID_INGEST_TOKEN_FILE: '/etc/grid/ingest-token/token',
    });
    expect(config).toMatchObject({
      signalsAddress: '0.0.0.0:9443',
      signalsAdvertise: '10.0.0.5:9443',
      gatewayAgeAddress: '0.0.0.0:9444',
      ingestTokenFile: '/etc/grid/ingest-token/token',
      peerPollIntervalMs: 2_000,
    });
  });

  it('refuses an ingest listener without a token file, and a token file without the listener, in one line naming both', () => {
    const missing = (() => {
      try {
        parseConfig([...base, '--gateway-age-address', '0.0.0.0:7951'], {});
      } catch (error) {
        return error;
      }
      return undefined;
    })();
    expect(missing).toBeInstanceOf(ConfigError);
    expect((missing as Error).message).toBe(
      "--gateway-age-address (env GRID_GATEWAY_AGE_ADDRESS) needs --ingest-token-file (env GRID_INGEST_TOKEN_FILE): the file holding the bearer token the site's gateways send (Secret grid-ingest-token, key token)",
    );
    expect(() => parseConfig([...base, '--ingest-token-file', '/t'], {})).toThrow(
      /--ingest-token-file \(env GRID_INGEST_TOKEN_FILE\) is set but --gateway-age-address/,
    );
  });

  it.each([
    [['--signals-address', 'nine-four-four-three'], '--signals-address (env GRID_SIGNALS_ADDRESS)'],
    [['--signals-advertise', '10.0.0.5'], '--signals-advertise (env GRID_SIGNALS_ADVERTISE)'],
    [
      ['--gateway-age-address', ':99999', '--ingest-token-file', '/t'],
      '--gateway-age-address (env GRID_GATEWAY_AGE_ADDRESS)',
    ],
    [['--peer-poll-interval', '0s'], '--peer-poll-interval (env GRID_PEER_POLL_INTERVAL)'],
    [['--peer-poll-interval', 'often'], '--peer-poll-interval (env GRID_PEER_POLL_INTERVAL)'],
  ])('refuses %j naming the flag', (flags, named) => {
    expect(() => parseConfig([...base, ...flags], {})).toThrow(ConfigError);
    expect(() => parseConfig([...base, ...flags], {})).toThrow(named);
  });
});
