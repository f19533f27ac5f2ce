// Your grid: the sites, the providers each site offers and the gateways it runs. `npm run synth` checks this
// declaration (every mistake at once, nothing written) and compiles it into dist/: crds.k8s.yaml once per cluster,
// and one <site>.k8s.yaml per site. Commit dist/ with this file. Your editor explains every field (hover it).
// `agn init` copies this file from the agn-ts package; inside agn-ts it is type-checked against the constructs.
import type { GridDeclaration } from './index.ts';

const grid: GridDeclaration = {
  // The GridNetwork every site joins; routing policy is grid-wide. Omit `policy` for the CRD defaults.
  network: {
    name: 'my-grid',
    policy: { routingPolicy: 'geographyFirst', scoringPolicy: { strategy: 'queueDepth' } },
  },
  sites: [
    {
      // The site name is its gossip identity and the name of its file in dist/.
      name: 'east',
      region: 'us-east-1',
      zone: 'us-east-1a',
      // Other sites' gossip addresses (host:port); none for a grid of one site.
      seeds: [],
      // How other sites reach this site's provider gateway. The TLS mode is required, never guessed.
      gatewayEndpoint: {
        address: 'gateway.east.example.com:8443',
        tls: { mode: 'Mutual', serverName: 'gateway.east.example.com' },
      },
      // A combined site: a consumer gateway for this cluster's workloads and a provider gateway in front of its
      // providers. Drop consumerGateway for a provider-only site.
      consumerGateway: {},
      providerGateway: { trustedPeers: [{ organization: 'my-grid-consumers' }] },
      providers: [
        {
          name: 'east-llm',
          // A simulated backend (the sim daemon) so this grid runs before a real model server exists. Remove it and
          // set spec.endpoint to your server (http://vllm.models.svc.cluster.local:8000, https://api.openai.com).
          simulated: true,
          // The InferenceProvider spec, typed from its CRD schema. The credential is a Secret reference: create the
          // Secret in the cluster; only this site's provider gateway mounts it.
          spec: {
            providerKind: 'self_hosted',
            backendKind: 'local',
            models: [{ name: 'my-model', capabilities: ['text_generation'] }],
            auth: {
              strategy: 'bearer_token',
              secretRef: { name: 'east-llm-credential', namespace: 'grid-system', key: 'token' },
            },
          },
        },
      ],
    },
  ],
};

export default grid;
