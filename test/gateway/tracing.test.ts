// OpenTelemetry traces across the grid, read by a real OTLP/HTTP receiver that decodes the protobuf wire format
// (test/shared/otlp-receiver.ts): a caller's trace continues through the consumer gateway (server span, route span,
// provider-hop client span), the provider gateway over mTLS (server span whose parent is the consumer's hop span,
// route span, upstream client span) and reaches the sim as `traceparent`. GenAI attributes carry the operation,
// models, token usage and a streamed answer's time to first token; no prompt, completion or credential byte is in
// any export. Both gateways are real processes configured only by the standard OTEL_* environment.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSim } from '../../daemons/sim/server.ts';
import type { SimServer } from '../../daemons/sim/server.ts';
import { stableId } from '../../schemas/fnv1a.ts';
import {
  EDGE_ORG,
  PROVIDER_SNI,
  candidate,
  consumerConfig,
  makePki,
  payload,
  providerConfig,
  spawnDaemon,
  startConsumer,
  tempDir,
  waitForPort,
  writeOverlay,
} from './helpers.ts';
import type { Daemon } from './helpers.ts';
import { type OtlpReceiver, type ReceivedSpan, SPAN_KIND, startOtlpReceiver } from '../shared/otlp-receiver.ts';
import { renderWaterfall, waterfallRows } from '../observability/waterfall.ts';
import { REPO_ROOT } from '../fixtures-path.ts';

const TOKEN = 'trace-backend-token-3f9a1c7e';
const PROMPT = 'PROMPT-TEXT-that-must-never-be-exported';
const CLUSTER = 'prov-east';
const CANDIDATE = stableId('inference_model', 'm1', 'east', CLUSTER);
// The caller's own trace: W3C traceparent version 00, sampled.
const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';

describe('tracing: one trace from the caller through both gateways to the backend', { timeout: 60_000 }, () => {
  let receiver: OtlpReceiver;
  let sim: SimServer;
  let provider: Daemon;
  let consumer: { daemon: Daemon; base: string; admin: string };
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    const temp = await tempDir('tracing');
    const dir = temp.dir;
    const pki = await makePki(dir);
    receiver = await startOtlpReceiver();
    // Real engine timing: a streamed answer's first token comes well before its last.
    sim = await startSim({
      name: 'sim-east',
      models: ['m1'],
      token: TOKEN,
      engine: { stepOverheadMs: 20, decodeMsPerSeq: 0, prefillMsPerToken: 0 },
    });
    const tokenFile = join(dir, 'token');
    await writeFile(tokenFile, TOKEN, { mode: 0o600 });
    const providerPath = join(dir, 'provider.json');
    await writeFile(
      providerPath,
      JSON.stringify(
        providerConfig({
          pki,
          trusted: [{ organization: EDGE_ORG }],
          routes: [
            {
              candidate_id: CANDIDATE,
              model: 'm1',
              cluster: 'backend',
              paths: ['/v1/chat/completions'],
              credential: {
                strategy: 'bearer_token',
                secretRef: { name: 'cred', namespace: 'grid-system', key: 'token' },
              },
            },
          ],
          credentials: [
            { strategy: 'bearer_token', name: 'cred', namespace: 'grid-system', key: 'token', file: tokenFile },
          ],
          clusters: [{ name: 'backend', endpoints: [`127.0.0.1:${sim.port}`] }],
        }),
      ),
    );
    const otel = (service: string) => ({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_SERVICE_NAME: service,
      OTEL_RESOURCE_ATTRIBUTES: 'grid.site=east,k8s.namespace.name=grid-system',
    });
    provider = spawnDaemon('daemons/gateway/main.ts', ['--config', providerPath], otel('provider-gateway'));
    const providerPort = await waitForPort(provider, 'provider');
    const overlayPath = join(dir, 'overlay.json');
    await writeOverlay(overlayPath, payload([candidate('m1', 'east', CLUSTER)]));
    const doc = consumerConfig({
      overlayPath,
      hops: [CLUSTER],
      clusters: [
        {
          name: CLUSTER,
          endpoints: [`127.0.0.1:${providerPort}`],
          tls: {
            ca: { ca_path: pki.caPath },
            client_cert: { cert_path: pki.edgeCertPath, key_path: pki.edgeKeyPath },
            sni: PROVIDER_SNI,
            verify: true,
          },
        },
      ],
    }) as { filter_chains: { filters: Record<string, unknown>[] }[] };
    // usage_meter reads the answer's token usage, which the trace carries too.
    doc.filter_chains[0]!.filters.splice(1, 0, { filter: 'usage_meter' });
    const consumerPath = join(dir, 'consumer.json');
    await writeFile(consumerPath, JSON.stringify(doc));
    consumer = await startConsumer(consumerPath, otel('consumer-gateway'));
    cleanup = async () => {
      await Promise.all([consumer.daemon.stop(), provider.stop()]);
      await Promise.all([sim.close(), receiver.close()]);
      await temp.cleanup();
    };
  });
  afterAll(async () => {
    await cleanup?.();
  });

  const chat = (stream: boolean, headers: Record<string, string> = {}) =>
    fetch(`${consumer.base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({
        model: 'm1',
        messages: [{ role: 'user', content: PROMPT }],
        max_tokens: 6,
        ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
      }),
    });

  it("continues the caller's trace through consumer, provider and backend, each span under the right parent", async () => {
    const reply = await chat(true, { traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` });
    expect(reply.status).toBe(200);
    const text = await reply.text();
    const usage = text
      .split('\n\n')
      .map((e) => e.replace(/^data: /, ''))
      .filter((e) => e.startsWith('{'))
      .map((e) => JSON.parse(e) as { usage?: { prompt_tokens: number; completion_tokens: number } })
      .find((e) => e.usage != null)!.usage!;
    const spans = await receiver.waitForSpans(
      (all) => all.filter((s) => s.traceId === CALLER_TRACE).length >= 6,
      15_000,
    );
    const ours = spans.filter((s) => s.traceId === CALLER_TRACE);
    const one = (service: string, name: string): ReceivedSpan => {
      const found = ours.filter((s) => s.serviceName === service && s.name === name);
      expect(found, `${service} ${name} in ${ours.map((s) => `${s.serviceName}/${s.name}`).join(', ')}`).toHaveLength(
        1,
      );
      return found[0]!;
    };
    const consumerServer = one('consumer-gateway', 'chat consumer gateway');
    const consumerRoute = one('consumer-gateway', 'grid.route');
    const hop = one('consumer-gateway', 'grid.provider_hop');
    const providerServer = one('provider-gateway', 'chat provider gateway');
    const providerRoute = one('provider-gateway', 'grid.route');
    const upstream = one('provider-gateway', 'grid.upstream');
    expect(consumerServer).toMatchObject({ parentSpanId: CALLER_SPAN, kind: SPAN_KIND.server });
    expect(consumerRoute).toMatchObject({ parentSpanId: consumerServer.spanId, kind: SPAN_KIND.internal });
    expect(hop).toMatchObject({ parentSpanId: consumerServer.spanId, kind: SPAN_KIND.client });
    expect(providerServer).toMatchObject({ parentSpanId: hop.spanId, kind: SPAN_KIND.server });
    expect(providerRoute.parentSpanId).toBe(providerServer.spanId);
    expect(upstream).toMatchObject({ parentSpanId: providerServer.spanId, kind: SPAN_KIND.client });
    // The backend got the provider's upstream span as its parent.
    const backend = sim.requests.filter((r) => r.headers['traceparent']?.includes(CALLER_TRACE));
    expect(backend.map((r) => r.headers['traceparent'])).toEqual([`00-${CALLER_TRACE}-${upstream.spanId}-01`]);

    expect(consumerServer.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'm1',
      'gen_ai.response.model': 'm1',
      'gen_ai.usage.input_tokens': usage.prompt_tokens,
      'gen_ai.usage.output_tokens': usage.completion_tokens,
      'grid.site': 'east',
      'grid.candidate': CANDIDATE,
      'gen_ai.provider.name': CLUSTER,
      'http.request.method': 'POST',
      'url.path': '/v1/chat/completions',
      'http.response.status_code': 200,
    });
    expect(providerServer.attributes).toMatchObject({
      'grid.candidate': CANDIDATE,
      'gen_ai.request.model': 'm1',
      'http.response.status_code': 200,
    });
    expect(consumerServer.resource).toMatchObject({
      'service.name': 'consumer-gateway',
      'grid.site': 'east',
      'k8s.namespace.name': 'grid-system',
    });
    // A streamed answer: the span ends at the last event, its first token well before that.
    const ttft = consumerServer.attributes['gen_ai.server.time_to_first_token'] as number;
    const duration = Number(consumerServer.endTimeUnixNano - consumerServer.startTimeUnixNano) / 1e9;
    expect(ttft).toBeGreaterThan(0);
    expect(ttft).toBeLessThan(duration - 0.04);
    expect(upstream.events.map((e) => e.name)).toEqual(['first byte']);
    // docs/observability.md's picture of a trace is this one (AGN_WRITE_WATERFALL=1 rewrites docs/trace-waterfall.svg).
    const rows = waterfallRows(ours);
    expect(rows.map((r) => `${r.depth} ${r.span.serviceName}/${r.span.name}`)).toEqual([
      '0 consumer-gateway/chat consumer gateway',
      '1 consumer-gateway/grid.route',
      '1 consumer-gateway/grid.provider_hop',
      '2 provider-gateway/chat provider gateway',
      '3 provider-gateway/grid.route',
      '3 provider-gateway/grid.upstream',
    ]);
    if (process.env['AGN_WRITE_WATERFALL'] === '1') {
      await writeFile(
        join(REPO_ROOT, 'docs/trace-waterfall.svg'),
        renderWaterfall(ours, 'A streamed chat completion: consumer gateway -> provider gateway (mTLS) -> sim'),
      );
    }
  });

  it('starts a new trace for a caller without one, and a failed request is an error span', async () => {
    const before = new Set(receiver.spans.map((s) => s.traceId));
    expect((await chat(false)).status).toBe(200);
    const unknown = await fetch(`${consumer.base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'no-such-model', messages: [] }),
    });
    expect(unknown.status).toBe(404);
    const spans = await receiver.waitForSpans(
      (all) =>
        all.filter((s) => !before.has(s.traceId) && s.serviceName === 'consumer-gateway' && s.kind === SPAN_KIND.server)
          .length >= 2,
      15_000,
    );
    const servers = spans.filter(
      (s) => !before.has(s.traceId) && s.serviceName === 'consumer-gateway' && s.kind === SPAN_KIND.server,
    );
    const ok = servers.find((s) => s.attributes['http.response.status_code'] === 200)!;
    expect(ok.parentSpanId).toBe('');
    expect(ok.attributes['gen_ai.usage.output_tokens']).toBeGreaterThan(0);
    const refused = servers.find((s) => s.attributes['http.response.status_code'] === 404)!;
    expect(refused.attributes['gen_ai.request.model']).toBeUndefined();
    expect(refused.status.code).toBe(0);
  });

  it('exposes the GenAI metrics as Prometheus histograms: token usage, duration, time to first token and per output token', async () => {
    const text = await (await fetch(`${consumer.admin}/metrics`)).text();
    const sample = (series: string): number | undefined => {
      const line = text.split('\n').find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.slice(series.length + 1));
    };
    const labels = 'gen_ai_operation_name="chat",gen_ai_request_model="m1",gen_ai_provider_name="prov-east"';
    // Two answered chats (one streamed), each counted once per token type; the streamed one alone has a first token.
    expect(sample(`gen_ai_client_token_usage_count{${labels},gen_ai_token_type="output"}`)).toBe(2);
    expect(sample(`gen_ai_client_token_usage_sum{${labels},gen_ai_token_type="output"}`)).toBeGreaterThanOrEqual(2);
    expect(sample(`gen_ai_client_operation_duration_seconds_count{${labels},error_type=""}`)).toBe(2);
    expect(sample(`gen_ai_server_time_to_first_token_seconds_count{${labels}}`)).toBe(1);
    expect(sample(`gen_ai_server_time_per_output_token_seconds_count{${labels}}`)).toBe(1);
    const ttft = sample(`gen_ai_server_time_to_first_token_seconds_sum{${labels}}`)!;
    expect(ttft).toBeGreaterThan(0);
    expect(ttft).toBeLessThan(sample(`gen_ai_client_operation_duration_seconds_sum{${labels},error_type=""}`)!);
  });

  it('exports no prompt, completion, token or key bytes', () => {
    expect(receiver.rawBodies.length).toBeGreaterThan(0);
    for (const body of receiver.rawBodies) {
      expect(body.includes(PROMPT)).toBe(false);
      expect(body.includes(TOKEN)).toBe(false);
    }
    for (const span of receiver.spans)
      for (const value of Object.values(span.attributes)) expect(String(value)).not.toMatch(/Bearer|PROMPT-TEXT/);
  });

  it('refuses a gateway start with a tracing environment it cannot honour, naming the variable', async () => {
    for (const [env, message] of [
      [
        { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_TRACES_SAMPLER: 'sometimes' },
        'OTEL_TRACES_SAMPLER "sometimes" is not one of',
      ],
      [
        { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
        'OTLP protocol "grpc" is not supported',
      ],
      [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://user:pw@127.0.0.1:4318' }, 'carries credentials in its URL'],
    ] as const) {
      const daemon = spawnDaemon(
        'daemons/gateway/main.ts',
        ['--config', join(consumer.daemon.proc.spawnargs.at(-1)!)],
        env,
      );
      const code = await new Promise<number | null>((resolve) => daemon.proc.once('exit', resolve));
      expect(code).toBe(1);
      expect(daemon.stderr()).toContain(message);
      expect(daemon.stderr()).not.toContain('pw@');
    }
  });
});
