// A consumer gateway in front of a plain HTTP server the test writes itself: for request-path behaviour a sim cannot
// produce on cue (an answer held back, a huge body written with its own backpressure).
import { createServer, type RequestListener, type Server } from 'node:http';
import { join } from 'node:path';
import { resolveConfig } from '../../daemons/gateway/config.ts';
import { startGateway, type GatewayInstance } from '../../daemons/gateway/server.ts';
import { capturingLogger } from '../gossip-operator/helpers.ts';
import { candidate, consumerConfig, payload, tempDir, writeOverlay } from './helpers.ts';

export interface RawUpstreamGateway {
  readonly gateway: GatewayInstance;
  readonly upstream: Server;
  /** The consumer's listener port; model m1 routes to the upstream. */
  readonly port: number;
  close(): Promise<void>;
}

export async function consumerBeforeRawUpstream(name: string, answer: RequestListener): Promise<RawUpstreamGateway> {
  const upstream = createServer(answer);
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const dirs = await tempDir(name);
  const overlayPath = join(dirs.dir, 'routing-overlay.json');
  await writeOverlay(overlayPath, payload([candidate('m1', 'west', 'raw')]));
  const upstreamPort = (upstream.address() as { port: number }).port;
  const gateway = await startGateway(
    resolveConfig(
      consumerConfig({ overlayPath, clusters: [{ name: 'raw', endpoints: [`127.0.0.1:${upstreamPort}`] }] }),
      'consumer.json',
    ),
    {
      configDir: dirs.dir,
      logger: capturingLogger().logger,
      processMetrics: false,
      overlayPollIntervalMs: 0,
    },
  );
  return {
    gateway,
    upstream,
    port: gateway.listeners[0]!.port,
    async close() {
      await gateway.close();
      upstream.closeAllConnections();
      await new Promise((resolve) => upstream.close(resolve));
      await dirs.cleanup();
    },
  };
}
