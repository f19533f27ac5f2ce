// Edits a user makes to the scaffold's grid.ts, shared by the CLI test and the installed-package test. Each edit
// replaces an anchor of the starter text; a missing anchor fails loudly, so a changed starter cannot silently make
// an edit a no-op.

function replaceOnce(text: string, anchor: string, replacement: string): string {
  const at = text.indexOf(anchor);
  if (at < 0 || text.indexOf(anchor, at + anchor.length) >= 0) throw new Error(`the starter grid.ts no longer has exactly one ${JSON.stringify(anchor)}`);
  return text.slice(0, at) + replacement + text.slice(at + anchor.length);
}

/** A provider-only second site, west, with a simulated provider and an external API, and east seeded with it. */
export function withSecondSite(grid: string): string {
  const seeded = replaceOnce(grid, 'seeds: [],', "seeds: ['gossip.west.example.com:7946'],");
  return replaceOnce(
    seeded,
    '  ],\n};',
    `    {
      name: 'west',
      region: 'us-west-2',
      seeds: ['gossip.east.example.com:7946'],
      gatewayEndpoint: { address: 'gateway.west.example.com:8443', tls: { mode: 'Mutual', serverName: 'gateway.west.example.com' } },
      providerGateway: { trustedPeers: [{ organization: 'my-grid-consumers' }] },
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
export function withMistakes(grid: string): string {
  let text = withSecondSite(grid);
  text = replaceOnce(text, "providerKind: 'self_hosted',\n            backendKind: 'local',\n            models: [{ name: 'my-model', capabilities", "providerKind: 'self_hosted',\n            capacityWeight: 5000,\n            backendKind: 'local',\n            models: [{ name: 'my-model', capabilities");
  text = replaceOnce(text, "models: [{ name: 'gpt-4o-mini' }],", "models: [{ name: 'gpt-4o-mini' }],\n            healthCheck: { interval: '5 minutes' },");
  text = replaceOnce(text, "      gatewayEndpoint: { address: 'gateway.west.example.com:8443', tls: { mode: 'Mutual', serverName: 'gateway.west.example.com' } },\n      providerGateway: { trustedPeers: [{ organization: 'my-grid-consumers' }] },\n", '');
  return text;
}

/** What `agn validate` prints for withMistakes(), in order: every site's problems, one line each. */
export const MISTAKES = [
  'west: gatewayEndpoint: site west offers providers but declares no gatewayEndpoint, so the consumer gateway of east cannot reach them. Fix: set gatewayEndpoint { address: host:port of its provider gateway, tls: { mode: Mutual, serverName } }',
  'east/providers/east-llm: spec.capacityWeight: must be <= 1000 (got 5000). Fix: set capacityWeight to an integer from 1 to 1000 (omit it for weight 1)',
  'west: providerGateway: site west declares providers but no provider gateway to front them. Fix: add providerGateway with the trustedPeers (consumer identities) allowed to call them',
  'west/providers/openai: spec.healthCheck.interval: must match ^([1-9][0-9]*s|[1-9][0-9]{3,}ms)$ (got "5 minutes"). Fix: write the duration as whole seconds like 30s, or milliseconds of at least 1000ms',
];
