// GatewayResponse adds the request id, the routed site and the headers filters added to every head, whichever form of
// writeHead wrote it (a headers object, a status message, Node's flat array, or the implicit head of a bare end()),
// and adds nothing to a response the gateway never handled. A real node:http server with the class as its ServerResponse.
import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { GatewayResponse } from '../../daemons/gateway/response.ts';

type Form = 'object' | 'message' | 'array' | 'implicit' | 'unhandled';

describe('GatewayResponse', () => {
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  });

  async function answer(form: Form, routedSite?: string): Promise<Response> {
    server = createServer({ ServerResponse: GatewayResponse }, (_req, res) => {
      const response = res as GatewayResponse;
      if (form !== 'unhandled') response.requestId = '0123456789abcdef0123456789abcdef';
      if (routedSite !== undefined) response.routedSite = routedSite;
      if (form === 'object' || form === 'unhandled') response.writeHead(201, { 'content-type': 'text/plain' });
      else if (form === 'message') response.writeHead(201, 'Made', { 'content-type': 'text/plain' });
      else if (form === 'array') response.writeHead(201, ['content-type', 'text/plain']);
      else response.statusCode = 201;
      response.end('ok');
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const res = await fetch(`http://127.0.0.1:${(server.address() as { port: number }).port}/`);
    await res.text();
    return res;
  }

  for (const form of ['object', 'message', 'array', 'implicit'] as const) {
    it(`adds x-request-id and x-agn-routed-site to a head written as ${form}`, async () => {
      const res = await answer(form, 'west');
      expect(res.status).toBe(201);
      expect(res.headers.get('x-request-id')).toBe('0123456789abcdef0123456789abcdef');
      expect(res.headers.get('x-agn-routed-site')).toBe('west');
      if (form !== 'implicit') expect(res.headers.get('content-type')).toBe('text/plain');
      if (form === 'message') expect(res.statusText).toBe('Made');
    });
  }

  it('adds the headers filters added, the last value of a name winning, to an error head too', async () => {
    server = createServer({ ServerResponse: GatewayResponse }, (_req, res) => {
      const response = res as GatewayResponse;
      response.requestId = '0123456789abcdef0123456789abcdef';
      response.addHeader('x-grid-site', 'east');
      response.addHeader('x-grid-site', 'west');
      response.addHeader('x-ratelimit-remaining-requests', '0');
      response.writeHead(429, { 'content-type': 'application/json', 'retry-after': '3' });
      response.end('{}');
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const res = await fetch(`http://127.0.0.1:${(server.address() as { port: number }).port}/`);
    await res.text();
    expect(res.status).toBe(429);
    expect(res.headers.get('x-grid-site')).toBe('west');
    expect(res.headers.get('x-ratelimit-remaining-requests')).toBe('0');
    expect(res.headers.get('retry-after')).toBe('3');
    expect(res.headers.get('x-request-id')).toBe('0123456789abcdef0123456789abcdef');
  });

  it('adds no routed site before a candidate is chosen, and nothing to a response the gateway never handled', async () => {
    const routed = await answer('object');
    expect(routed.headers.get('x-request-id')).toBe('0123456789abcdef0123456789abcdef');
    expect(routed.headers.has('x-agn-routed-site')).toBe(false);
    await new Promise((resolve) => server!.close(resolve));
    const unhandled = await answer('unhandled', undefined);
    expect(unhandled.headers.has('x-request-id')).toBe(false);
    expect(unhandled.headers.get('content-type')).toBe('text/plain');
  });
});
