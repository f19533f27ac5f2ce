// Edits a user makes to the scaffold's grid.ts, shared by the CLI test and the installed-package test. Each edit
// replaces an anchor of the starter text; a missing anchor fails loudly, so a changed starter cannot silently make
// an edit a no-op.

function replaceOnce(text: string, anchor: string, replacement: string): string {
  const at = text.indexOf(anchor);
  if (at < 0 || text.indexOf(anchor, at + anchor.length) >= 0)
    throw new Error(`the starter grid.ts no longer has exactly one ${JSON.stringify(anchor)}`);
  return text.slice(0, at) + replacement + text.slice(at + anchor.length);
}

/**
 * A provider-only second site, west, with a simulated provider and an external API: both sites reachable through
 * LoadBalancer Services (their seeds are each other's gossipAddress by default), and the declaration reading the
 * trust file `agn pki init` writes. `from` is where readGridTrust comes from: the installed package, or this
 * repository's constructs for a run without an install.
 */
export function withSecondSite(grid: string, from = 'agn-ts'): string {
  let text = replaceOnce(
    grid,
    "import type { GridDeclaration } from 'agn-ts';",
    `import { readGridTrust, type GridDeclaration } from '${from}';`,
  );
  text = replaceOnce(
    text,
    'const grid: GridDeclaration = {\n',
    "const grid: GridDeclaration = {\n  trust: readGridTrust(new URL('./grid-trust.json', import.meta.url)),\n",
  );
  text = replaceOnce(
    text,
    'seeds: [],',
    "gossipAddress: 'gossip.east.example.com:7946',\n      gossipService: { type: 'LoadBalancer' },",
  );
  text = replaceOnce(
    text,
    "providerGateway: { trustedPeers: [{ organization: 'my-grid-consumers' }] },",
    "providerGateway: { trustedPeers: [{ organization: 'my-grid-consumers' }], exposure: { type: 'LoadBalancer' } },",
  );
  return replaceOnce(
    text,
    '  ],\n};',
    `    {
      name: 'west',
      region: 'us-west-2',
      gossipAddress: 'gossip.west.example.com:7946',
      gossipService: { type: 'LoadBalancer' },
      gatewayEndpoint: { address: 'gateway.west.example.com:8443', tls: { mode: 'Mutual', serverName: 'gateway.west.example.com' } },
      providerGateway: { trustedPeers: [{ organization: 'my-grid-consumers' }], exposure: { type: 'LoadBalancer' } },
      providers: [
        {
          name: 'west-llm',
          simulated: true,
          spec: {
            providerKind: 'self_hosted',
            backendKind: 'local',
            models: [{ name: 'my-model' }],
            auth: { strategy: 'bearer_token', secretRef: { name: 'west-llm-credential', namespace: 'grid-system', key: 'token' } },
          },
        },
        {
          name: 'openai',
          spec: {
            providerKind: 'open_ai',
            backendKind: 'api_provider',
            endpoint: 'https://api.openai.com',
            models: [{ name: 'gpt-4o-mini' }],
            auth: { strategy: 'bearer_token', secretRef: { name: 'openai-credential', namespace: 'grid-system', key: 'token' } },
          },
        },
      ],
    },
  ],
};`,
  );
}

/** The two-site grid with four mistakes in two sites: two schema rules, one missing gateway, one missing endpoint. */
export function withMistakes(grid: string, from = 'agn-ts'): string {
  let text = withSecondSite(grid, from);
  text = replaceOnce(
    text,
    "providerKind: 'self_hosted',\n            backendKind: 'local',\n            models: [{ name: 'my-model', capabilities",
    "providerKind: 'self_hosted',\n            capacityWeight: 5000,\n            backendKind: 'local',\n            models: [{ name: 'my-model', capabilities",
  );
  text = replaceOnce(
    text,
    "models: [{ name: 'gpt-4o-mini' }],",
    "models: [{ name: 'gpt-4o-mini' }],\n            healthCheck: { interval: '5 minutes' },",
  );
  text = replaceOnce(
    text,
    "      gatewayEndpoint: { address: 'gateway.west.example.com:8443', tls: { mode: 'Mutual', serverName: 'gateway.west.example.com' } },\n      providerGateway: { trustedPeers: [{ organization: 'my-grid-consumers' }], exposure: { type: 'LoadBalancer' } },\n",
    '',
  );
  return text;
}

/** What `agn validate` prints for withMistakes(), in order: every site's problems, one line each. */
export const MISTAKES = [
  'west: gatewayEndpoint: site west offers providers but declares no gatewayEndpoint, so the consumer gateway of east cannot reach them. Fix: set gatewayEndpoint { address: host:port of its provider gateway, tls: { mode: Mutual, serverName } }',
  'east/providers/east-llm: spec.capacityWeight: must be <= 1000 (got 5000). Fix: set capacityWeight to an integer from 1 to 1000 (omit it for weight 1)',
  'west: providerGateway: site west declares providers but no provider gateway to front them. Fix: add providerGateway with the trustedPeers (consumer identities) allowed to call them',
  'west/providers/openai: spec.healthCheck.interval: must match ^([1-9][0-9]*s|[1-9][0-9]{3,}ms)$ (got "5 minutes"). Fix: write the duration as whole seconds like 30s, or milliseconds of at least 1000ms',
];
