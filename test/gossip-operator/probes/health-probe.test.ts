import { afterEach, describe, expect, it } from 'vitest';
import { createCertificateAuthority, createServerCertificate } from '../../../daemons/shared/tls.ts';
import { probeHealth } from '../../../daemons/gossip-operator/probes/health-probe.ts';
import { closedPort } from '../../closed-port.ts';
import { type TestServer, startServer } from './servers.ts';

const servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function tlsPair() {
  const ca = await createCertificateAuthority();
  const leaf = await createServerCertificate(ca, { commonName: 'backend', sans: ['127.0.0.1', 'localhost'] });
  return { ca, tls: { cert: leaf.certPem, key: leaf.keyPem } };
}

describe('InferenceProvider health probe (seed 001 "healthCheck")', () => {
  it('probes {endpoint}/health and reports healthy on 2xx', async () => {
    const server = await startServer((_q, res) => res.end('ok'));
    servers.push(server);
    expect(await probeHealth({ providerEndpoint: server.url, timeoutMs: 2000 })).toMatchObject({
      healthy: true,
      result: 'healthy',
    });
    expect(server.requests[0]?.url).toBe('/health');
  });

  it('sends the bearer token on a same-origin HTTPS probe', async () => {
    const { ca, tls } = await tlsPair();
    const server = await startServer((_q, res) => res.end('ok'), tls);
    servers.push(server);
    const outcome = await probeHealth({
      providerEndpoint: server.url,
      path: '/healthz',
      bearerToken: 'tok-abc',
      tls: { ca: ca.certPem },
      timeoutMs: 2000,
    });
    expect(outcome).toMatchObject({ healthy: true, sentCredential: true });
    expect(server.requests[0]).toMatchObject({ url: '/healthz', headers: { authorization: 'Bearer tok-abc' } });
  });

  it('probes anonymously over plain HTTP and toward another origin ("Probes to a different origin or over plain HTTP remain anonymous")', async () => {
    const plain = await startServer((_q, res) => res.end('ok'));
    servers.push(plain);
    expect(await probeHealth({ providerEndpoint: plain.url, bearerToken: 'tok-abc', timeoutMs: 2000 })).toMatchObject({
      sentCredential: false,
    });
    const { ca, tls } = await tlsPair();
    const other = await startServer((_q, res) => res.end('ok'), tls);
    servers.push(other);
    // Same host, other port: a different origin.
    const outcome = await probeHealth({
      providerEndpoint: 'https://127.0.0.1:1',
      endpoint: other.url,
      bearerToken: 'tok-abc',
      tls: { ca: ca.certPem },
      timeoutMs: 2000,
    });
    expect(outcome).toMatchObject({ healthy: true, sentCredential: false });
    for (const request of [...plain.requests, ...other.requests]) expect(request.headers.authorization).toBeUndefined();
  });

  it('does not follow a redirect: a 3xx degrades health ("Redirects are not followed; a 3xx response degrades health")', async () => {
    const target = await startServer((_q, res) => res.end('ok'));
    const redirector = await startServer((_q, res) => {
      res.writeHead(302, { location: `${target.url}/health` });
      res.end();
    });
    servers.push(target, redirector);
    expect(await probeHealth({ providerEndpoint: redirector.url, timeoutMs: 2000 })).toMatchObject({
      healthy: false,
      result: 'redirect',
    });
    expect(target.requests).toHaveLength(0);
  });

  it('reports 5xx and refused connections as unhealthy with a category', async () => {
    const failing = await startServer((_q, res) => {
      res.writeHead(503);
      res.end();
    });
    servers.push(failing);
    expect(await probeHealth({ providerEndpoint: failing.url, timeoutMs: 2000 })).toMatchObject({
      healthy: false,
      result: 'http_status',
    });
    const port = await closedPort();
    expect(await probeHealth({ providerEndpoint: `http://127.0.0.1:${port}`, timeoutMs: 2000 })).toMatchObject({
      healthy: false,
      result: 'unreachable',
    });
  });
});
