// A streamed answer's head reaches the caller as soon as the upstream sends it, before the model's first token: a chat
// client shows the stream as started (200, text/event-stream) while the model is still thinking. The load balancer
// flushes a length-less head when it writes it; Node corks the socket until the next tick, so a first event that came in
// the same upstream read still goes out in the same write. These tests hold both orders to the caller's view. The
// upstream is a real HTTP server that writes the head, then the first event only when the test says so.
import type { ServerResponse } from 'node:http';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { chatBody } from './helpers.ts';
import { consumerBeforeRawUpstream, type RawUpstreamGateway } from './raw-upstream.ts';

const EVENT = 'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n';

describe('streamed answer head', () => {
  let fixture: RawUpstreamGateway | undefined;
  afterEach(async () => {
    await fixture?.close();
    fixture = undefined;
  });

  /** A consumer gateway in front of an upstream that hands each streamed answer to `answer`; the URL to call. */
  async function start(answer: (res: ServerResponse) => void): Promise<string> {
    fixture = await consumerBeforeRawUpstream('stream-head', (req, res) => {
      req.resume();
      req.on('end', () => answer(res));
    });
    return `http://127.0.0.1:${fixture.port}/v1/chat/completions`;
  }

  it('reaches the caller while the upstream has sent no event yet, and the event follows when it comes', async () => {
    let held: ServerResponse | undefined;
    const url = await start((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.flushHeaders();
      held = res;
    });
    const res = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chatBody('m1', { stream: true })),
    });
    // The head is here and the upstream still holds its first event: nothing waited for a body byte.
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream');
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f]{32}$/);
    expect(held).toBeDefined();
    expect(held!.writableEnded).toBe(false);
    held!.write(EVENT);
    held!.end('data: [DONE]\n\n');
    expect(await res.body.text()).toBe(`${EVENT}data: [DONE]\n\n`);
    // Without the flush the request above waits for a body byte the upstream never sends: it times out.
  }, 10_000);

  it('carries the first event that came with the head, and every later one', async () => {
    const url = await start((res) => {
      // Head and first event in one write, as the sim (and most servers) send them.
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(EVENT);
      setTimeout(() => res.end('data: [DONE]\n\n'), 50);
    });
    const res = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chatBody('m1', { stream: true })),
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream');
    expect(await res.body.text()).toBe(`${EVENT}data: [DONE]\n\n`);
  });
});
