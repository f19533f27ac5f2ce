import { describe, expect, it } from 'vitest';
import { SimBackend, simBackendUrl } from '../../constructs/sim-backend.ts';
import { chart, find, podSpec, synth } from './helpers.ts';

describe('SimBackend', () => {
  it('runs the sim daemon with its models and a token file, never a token literal (snapshot)', () => {
    const c = chart();
    const sim = new SimBackend(c, 'sim', { namespace: 'grid-system', provider: 'east-llm-a', models: ['m1', 'm2'], credential: { name: 'east-llm-a-credential', key: 'token' } });
    expect([sim.name, sim.port, sim.replicas, sim.endpointUrl]).toEqual(['sim-east-llm-a', 8080, 1, simBackendUrl('east-llm-a', 'grid-system')]);
    const objects = synth(c);
    expect(objects).toMatchSnapshot();
    const container = podSpec(find(objects, 'Deployment', 'sim-east-llm-a')).containers[0];
    expect(container?.command).toEqual([
      'node', 'daemons/sim/main.ts', '--name', 'east-llm-a', '--models', 'm1,m2', '--token-file', '/etc/sim/credential/token', '--host', '0.0.0.0', '--port', '8080', '--latency-ms', '0',
    ]);
    expect(container?.env).toBeUndefined();
  });
});
