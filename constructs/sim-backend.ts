import { Construct } from 'constructs';
import * as kplus from 'cdk8s-plus-28';
import { imageOf, type ImageReference } from './image-reference.ts';
import { workloadLabels } from './labels.ts';
import {
  CONTAINER_SECURITY,
  POD_SECURITY,
  daemonCommand,
  healthProbes,
  resources,
  tmpVolume,
} from './workload-defaults.ts';
import { GridSynthError, issueAt, type SynthIssue } from './synth-error.ts';

export interface SimBackendProps {
  readonly namespace: string;
  /** The InferenceProvider it stands in for; the Deployment and Service are `sim-<provider>`. */
  readonly provider: string;
  /** Models it answers for (the provider's spec.models names). */
  readonly models: readonly string[];
  /**
   * The bearer token Secret the provider gateway injects; the sim accepts only that token, so a request that
   * bypassed the provider gateway is refused even if a NetworkPolicy is missing.
   */
  readonly credential: { readonly name: string; readonly key: string };
  /** @default 8080 - the backend port */
  readonly port?: number;
  /** @default DEFAULT_IMAGE - the project image at this package's version; one image carries every daemon */
  readonly image?: ImageReference;
  /** @default 1 - a demo backend; capacity comes from adding providers, not replicas */
  readonly replicas?: number;
  /** @default 0 - added response latency, for demos of latency-aware routing */
  readonly latencyMs?: number;
  /**
   * The engine model's parameters (daemons/sim/README.md), to make backends of unequal speed and cache size.
   * @default - the sim's defaults: Llama-3.1-8B-Instruct on one H100 80GB
   */
  readonly engine?: SimEngineProps;
  /** @default 50m/64Mi requested, 500m/256Mi limit */
  readonly resources?: kplus.ContainerResources;
  /** Extra labels for every object this construct emits. @default - none (the workload labels only) */
  readonly labels?: Record<string, string>;
}

/** The sim's engine flags a declaration may set (daemons/sim/main.ts --help). */
export interface SimEngineProps {
  /** Running batch at most; more requests wait (--max-num-seqs). */
  readonly maxNumSeqs?: number;
  /** KV-cache blocks of 16 tokens in all (--num-gpu-blocks); they must hold one request of maxModelLen. */
  readonly numGpuBlocks?: number;
  /** Prompt plus output tokens at most (--max-model-len). */
  readonly maxModelLen?: number;
  /** Fixed cost of every engine step, ms (--step-overhead-ms). */
  readonly stepOverheadMs?: number;
  /** Cost of each uncached prompt token a step computes, ms (--prefill-ms-per-token). */
  readonly prefillMsPerToken?: number;
  /** Cost of each sequence a step decodes, ms (--decode-ms-per-seq). */
  readonly decodeMsPerSeq?: number;
}

/** The sim's defaults these checks need (daemons/sim/main.ts --help). */
const SIM_BLOCK_SIZE = 16;
const SIM_DEFAULT_GPU_BLOCKS = 28000;
const SIM_DEFAULT_MAX_MODEL_LEN = 131072;

const ENGINE_FLAGS: readonly [keyof SimEngineProps, string, 'count' | 'ms'][] = [
  ['maxNumSeqs', '--max-num-seqs', 'count'],
  ['numGpuBlocks', '--num-gpu-blocks', 'count'],
  ['maxModelLen', '--max-model-len', 'count'],
  ['stepOverheadMs', '--step-overhead-ms', 'ms'],
  ['prefillMsPerToken', '--prefill-ms-per-token', 'ms'],
  ['decodeMsPerSeq', '--decode-ms-per-seq', 'ms'],
];

/** The sim flags of `engine`, and a problem per value the sim would refuse at start. */
export function simEngineArgs(scope: Construct, engine: SimEngineProps | undefined): string[] {
  const args: string[] = [];
  const issues: SynthIssue[] = [];
  for (const [key, flag, kind] of ENGINE_FLAGS) {
    const value = engine?.[key];
    if (value === undefined) continue;
    const ok = kind === 'count' ? Number.isSafeInteger(value) && value >= 1 : Number.isFinite(value) && value >= 0;
    if (!ok)
      issues.push(
        issueAt(
          scope,
          `engine.${key}`,
          `${String(value)} is not ${kind === 'count' ? 'a whole number of at least 1' : 'a number of milliseconds of at least 0'}`,
          'set it as daemons/sim/README.md describes, or omit it for the sim default',
        ),
      );
    else args.push(flag, String(value));
  }
  // The sim's own start check: its cache must hold one request of the longest length it accepts.
  const blocks = engine?.numGpuBlocks ?? SIM_DEFAULT_GPU_BLOCKS;
  const length = engine?.maxModelLen ?? SIM_DEFAULT_MAX_MODEL_LEN;
  if (issues.length === 0 && blocks * SIM_BLOCK_SIZE < length) {
    issues.push(
      issueAt(
        scope,
        'engine.numGpuBlocks',
        `${blocks} blocks of ${SIM_BLOCK_SIZE} tokens cannot hold one request of maxModelLen ${length}`,
        `set numGpuBlocks to at least ${Math.ceil(length / SIM_BLOCK_SIZE)}, or lower maxModelLen`,
      ),
    );
  }
  if (issues.length > 0) throw new GridSynthError(issues);
  return args;
}

const TOKEN_DIR = '/etc/sim/credential';

/** The Deployment/Service name of a provider's simulated backend. */
export function simBackendName(provider: string): string {
  return `sim-${provider}`;
}

/** The in-cluster URL of a provider's simulated backend; the InferenceProvider's spec.endpoint. */
export function simBackendUrl(provider: string, namespace: string, port = 8080): string {
  return `http://${simBackendName(provider)}.${namespace}.svc.cluster.local:${port}`;
}

/** A simulated OpenAI-compatible backend (the sim daemon) for demos, replacing the reference's mock chart. */
export class SimBackend extends Construct {
  readonly name: string;
  readonly namespace: string;
  readonly port: number;
  readonly replicas: number;
  /** The container image string every workload of this construct runs (digest over tag). */
  readonly image: string;
  readonly imageReference: ImageReference | undefined;
  readonly selectorLabels: Record<string, string>;
  readonly deployment: kplus.Deployment;
  readonly service: kplus.Service;

  constructor(scope: Construct, id: string, props: SimBackendProps) {
    super(scope, id);
    this.name = simBackendName(props.provider);
    this.namespace = props.namespace;
    this.port = props.port ?? 8080;
    this.replicas = props.replicas ?? 1;
    this.imageReference = props.image;
    this.image = imageOf(this, props.image);
    this.selectorLabels = workloadLabels('inference-backend', this.name);
    const labels = { ...(props.labels ?? {}), ...this.selectorLabels };
    const token = kplus.Volume.fromSecret(
      this,
      'Token',
      kplus.Secret.fromSecretName(this, 'Credential', props.credential.name),
      {
        name: 'credential',
        items: { [props.credential.key]: { path: props.credential.key } },
        defaultMode: 0o440,
      },
    );
    const tmp = tmpVolume(this);
    this.deployment = new kplus.Deployment(this, 'Deployment', {
      metadata: { name: this.name, namespace: props.namespace, labels },
      replicas: this.replicas,
      select: false,
      automountServiceAccountToken: false,
      securityContext: POD_SECURITY,
      podMetadata: { labels },
    });
    this.deployment.select(kplus.LabelSelector.of({ labels: this.selectorLabels }));
    this.deployment.addContainer({
      name: 'sim',
      image: this.image,
      imagePullPolicy: kplus.ImagePullPolicy.IF_NOT_PRESENT,
      command: daemonCommand('sim', [
        '--name',
        props.provider,
        '--models',
        props.models.join(','),
        '--token-file',
        `${TOKEN_DIR}/${props.credential.key}`,
        '--host',
        '0.0.0.0',
        '--port',
        String(this.port),
        '--latency-ms',
        String(props.latencyMs ?? 0),
        ...simEngineArgs(this, props.engine),
      ]),
      ports: [{ number: this.port, name: 'http' }],
      securityContext: CONTAINER_SECURITY,
      resources: props.resources ?? resources(50, 64, 500, 256),
      ...healthProbes(this.port, '/health', '/health'),
      volumeMounts: [
        { path: TOKEN_DIR, volume: token, readOnly: true },
        { path: '/tmp', volume: tmp },
      ],
    });
    this.service = new kplus.Service(this, 'Service', {
      metadata: { name: this.name, namespace: props.namespace, labels },
      selector: kplus.Pods.select(this, 'Pods', { labels: this.selectorLabels }),
      ports: [{ name: 'http', port: this.port, targetPort: this.port }],
    });
  }

  /** The in-cluster endpoint the provider gateway and the operator's probes use. */
  get endpointUrl(): string {
    return `http://${this.name}.${this.namespace}.svc.cluster.local:${this.port}`;
  }
}
