import { describe, expect, it } from 'vitest';
import { SimBackend, simBackendUrl } from '../../constructs/sim-backend.ts';
import { chart, find, podSpec, synth } from './helpers.ts';
import { synthFailure } from './synth-failure.ts';

describe('SimBackend', () => {
  it('runs the sim daemon with its models and a token file, never a token literal (snapshot)', () => {
    const c = chart();
    const sim = new SimBackend(c, 'sim', {
      namespace: 'grid-system',
      provider: 'east-llm-a',
      models: ['m1', 'm2'],
      credential: { name: 'east-llm-a-credential', key: 'token' },
    });
    expect([sim.name, sim.port, sim.replicas, sim.endpointUrl]).toEqual([
      'sim-east-llm-a',
      8080,
      1,
      simBackendUrl('east-llm-a', 'grid-system'),
    ]);
    const objects = synth(c);
    expect(objects).toMatchSnapshot();
    const container = podSpec(find(objects, 'Deployment', 'sim-east-llm-a')).containers[0];
    expect(container?.command).toEqual([
      'node',
      'daemons/sim/main.ts',
      '--name',
      'east-llm-a',
      '--models',
      'm1,m2',
      '--token-file',
      '/etc/sim/credential/token',
      '--host',
      '0.0.0.0',
      '--port',
      '8080',
      '--latency-ms',
      '0',
    ]);
    expect(container?.env).toBeUndefined();
  });

  const props = {
    namespace: 'grid-system',
    provider: 'p',
    models: ['m'],
    credential: { name: 'p-credential', key: 'token' },
  };

  it('passes the engine parameters of a backend of its own speed and cache size as the sim flags', () => {
    const c = chart();
    new SimBackend(c, 'sim', {
      ...props,
      engine: {
        maxNumSeqs: 8,
        numGpuBlocks: 4096,
        maxModelLen: 32768,
        stepOverheadMs: 12.8,
        prefillMsPerToken: 0.07,
        decodeMsPerSeq: 0,
      },
    });
    const command = podSpec(find(synth(c), 'Deployment', 'sim-p')).containers[0]?.command ?? [];
    expect(command.slice(command.indexOf('--latency-ms') + 2)).toEqual([
      '--max-num-seqs',
      '8',
      '--num-gpu-blocks',
      '4096',
      '--max-model-len',
      '32768',
      '--step-overhead-ms',
      '12.8',
      '--prefill-ms-per-token',
      '0.07',
      '--decode-ms-per-seq',
      '0',
    ]);
  });

  it('refuses at synth what the sim would refuse at start, naming the field', () => {
    expect(synthFailure(() => new SimBackend(chart(), 'sim', { ...props, engine: { maxNumSeqs: 0 } }))).toBe(
      'test/sim: engine.maxNumSeqs: 0 is not a whole number of at least 1. Fix: set it as daemons/sim/README.md describes, or omit it for the sim default',
    );
    expect(synthFailure(() => new SimBackend(chart(), 'sim', { ...props, engine: { stepOverheadMs: -1 } }))).toBe(
      'test/sim: engine.stepOverheadMs: -1 is not a number of milliseconds of at least 0. Fix: set it as daemons/sim/README.md describes, or omit it for the sim default',
    );
    expect(synthFailure(() => new SimBackend(chart(), 'sim', { ...props, engine: { numGpuBlocks: 4096 } }))).toBe(
      'test/sim: engine.numGpuBlocks: 4096 blocks of 16 tokens cannot hold one request of maxModelLen 131072. Fix: set numGpuBlocks to at least 8192, or lower maxModelLen',
    );
  });
});
