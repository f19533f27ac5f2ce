// `agn up` arguments: --backend plugs a server the user runs (an MCP tool server, an A2A agent) in where the compiled
// manifests name an in-cluster Service; anything else is a usage error naming the value and the expected form.
import { describe, expect, it } from 'vitest';
import { parseBackend, parseUpArgs } from '../../daemons/cli/up.ts';
import { CliError } from '../../daemons/cli/cli-error.ts';

describe('agn up --backend', () => {
  it('takes SITE/HOST:PORT=LOCAL_HOST:PORT, repeatable', () => {
    const options = parseUpArgs(
      [
        '--backend',
        'east/db-tools.tools.svc.cluster.local:8080=127.0.0.1:9000',
        '--backend',
        'west/claims-agent.agents.svc.cluster.local:8080=localhost:9001',
      ],
      {},
    );
    expect(options.backends).toEqual([
      { site: 'east', address: 'db-tools.tools.svc.cluster.local:8080', endpoint: '127.0.0.1:9000' },
      { site: 'west', address: 'claims-agent.agents.svc.cluster.local:8080', endpoint: 'localhost:9001' },
    ]);
    expect(parseUpArgs([], {}).backends).toEqual([]);
  });

  it.each([
    'db-tools.tools.svc.cluster.local:8080=127.0.0.1:9000',
    'east/db-tools=127.0.0.1:9000',
    'east/db-tools:8080=127.0.0.1',
    'East/x:1=y:2',
    'east/x:1=y:2;rm',
  ])('refuses %s as a usage error (exit 2)', (value) => {
    let thrown: unknown;
    try {
      parseBackend(value);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(CliError);
    expect((thrown as CliError).message).toBe(
      `--backend ${value}: expected SITE/HOST:PORT=LOCAL_HOST:PORT, e.g. east/db-tools.tools.svc.cluster.local:8080=127.0.0.1:9000 (see agn --help)`,
    );
    expect((thrown as CliError & { exitCode: number }).exitCode).toBe(2);
  });
});
