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
    });
    expect(config).toMatchObject({ signalsAddress: '0.0.0.0:9443', signalsAdvertise: '10.0.0.5:9443', gatewayAgeAddress: '0.0.0.0:9444', peerPollIntervalMs: 2_000 });
  });

  it.each([
    [['--signals-address', 'nine-four-four-three'], '--signals-address (env GRID_SIGNALS_ADDRESS)'],
    [['--signals-advertise', '10.0.0.5'], '--signals-advertise (env GRID_SIGNALS_ADVERTISE)'],
    [['--gateway-age-address', ':99999'], '--gateway-age-address (env GRID_GATEWAY_AGE_ADDRESS)'],
    [['--peer-poll-interval', '0s'], '--peer-poll-interval (env GRID_PEER_POLL_INTERVAL)'],
    [['--peer-poll-interval', 'often'], '--peer-poll-interval (env GRID_PEER_POLL_INTERVAL)'],
  ])('refuses %j naming the flag', (flags, named) => {
    expect(() => parseConfig([...base, ...flags], {})).toThrow(ConfigError);
    expect(() => parseConfig([...base, ...flags], {})).toThrow(named);
  });
});
