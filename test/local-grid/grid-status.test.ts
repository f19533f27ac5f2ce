import { describe, expect, it } from 'vitest';
import { formatSnapshot, type GridSnapshot } from '../../daemons/local-grid/grid-status.ts';
import { DEFAULT_RESTART_POLICY, describeRestartPolicy } from '../../daemons/local-grid/restart-policy.ts';

const empty: GridSnapshot = {
  sites: [],
  providers: [],
  consumers: [],
  overlays: [],
  processes: [],
  restartPolicy: describeRestartPolicy(DEFAULT_RESTART_POLICY),
};

describe('live status table: processes', () => {
  it('says in one line that everything runs when nothing restarted', () => {
    const text = formatSnapshot({
      ...empty,
      processes: [
        { name: 'east/sim-a/sim', state: 'running', restarts: 0 },
        { name: 'east/gossip-operator/gossip-operator', state: 'running', restarts: 0 },
      ],
    });
    expect(text).toContain(
      'Processes (restart after 1 s doubling to 30 s, reset after 60 s running)\n  2 of 2 running, 0 restarts\n',
    );
    expect(text).not.toContain('NEXT RESTART');
  });

  it('lists each process that restarted or is down, with its last exit and the pending restart', () => {
    const text = formatSnapshot({
      ...empty,
      processes: [
        { name: 'east/sim-a/sim', state: 'running', restarts: 0 },
        {
          name: 'east/gossip-operator/gossip-operator',
          state: 'running',
          restarts: 2,
          lastExit: { code: null, signal: 'SIGKILL', agoMs: 12_000 },
        },
        {
          name: 'west/provider-gateway-0/gateway',
          state: 'backoff',
          restarts: 3,
          lastExit: { code: 1, signal: null, agoMs: 1_500 },
          nextRestartInMs: 6_500,
        },
        { name: 'west/sim-west-llm/sim', state: 'stopped', restarts: 0 },
      ],
    });
    const rows = text.slice(text.indexOf('Processes')).split('\n');
    expect(rows[1]).toBe('  2 of 4 running, 5 restarts');
    expect(rows[2]).toMatch(/^ {2}PROCESS +STATE +RESTARTS +LAST EXIT +NEXT RESTART$/);
    expect(rows[3]).toMatch(/^ {2}east\/gossip-operator\/gossip-operator +running +2 +SIGKILL, 12 s ago +-$/);
    expect(rows[4]).toMatch(/^ {2}west\/provider-gateway-0\/gateway +backoff +3 +status 1, 1\.5 s ago +in 6\.5 s$/);
    expect(rows[5]).toMatch(/^ {2}west\/sim-west-llm\/sim +stopped +0 +- +-$/);
    expect(text).not.toMatch(/east\/sim-a\/sim/);
  });
});
