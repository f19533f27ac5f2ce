// A caller that reads slowly holds the upstream back (the load balancer pauses its read while the caller's socket is
// full) instead of the gateway buffering the whole answer, and once it reads again it gets every byte. The upstream
// is a real HTTP server writing a 64 MiB answer with backpressure of its own, so how far it got shows how much the
// gateway took from it; the caller is a raw socket that stops reading for a while.
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { chatBody, waitFor } from './helpers.ts';
import { consumerBeforeRawUpstream, type RawUpstreamGateway } from './raw-upstream.ts';

const CHUNK = Buffer.alloc(64 * 1024, 'x');
const TOTAL = 64 * 1024 * 1024;

describe('load balancer backpressure', () => {
  let fixture: RawUpstreamGateway | undefined;
  afterEach(async () => {
    await fixture?.close();
    fixture = undefined;
  });

  it('pauses the upstream while the caller does not read, then delivers all of it', async () => {
    let written = 0;
    fixture = await consumerBeforeRawUpstream('backpressure', (req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': TOTAL });
        const pump = (): void => {
          while (written < TOTAL) {
            written += CHUNK.length;
            if (!res.write(CHUNK)) {
              res.once('drain', pump);
              return;
            }
          }
          res.end();
        };
        pump();
      });
    });

    const body = JSON.stringify(chatBody('m1'));
    const socket = connect(fixture.port, '127.0.0.1');
    let received = 0;
    let head = '';
    let headDone = false;
    socket.on('data', (chunk: Buffer) => {
      if (!headDone) {
        head += chunk.toString('latin1');
        const end = head.indexOf('\r\n\r\n');
        if (end === -1) return;
        headDone = true;
        received += Buffer.byteLength(head, 'latin1') - end - 4;
        // The caller stops reading right after the head and the first bytes.
        socket.pause();
        return;
      }
      received += chunk.length;
    });
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
    );
    await waitFor('the answer head', () => (headDone ? true : undefined));
    // Let the socket buffers between the three processes fill, then the upstream must have stalled far short of the end.
    let before = -1;
    await waitFor(
      'the upstream to stall',
      async () => {
        const now = written;
        await new Promise((resolve) => setTimeout(resolve, 200));
        if (now === written && now === before) return true;
        before = written;
        return undefined;
      },
      10_000,
    );
    expect(head).toMatch(/^HTTP\/1\.1 200 /);
    expect(written).toBeLessThan(TOTAL / 2);
    socket.resume();
    await closed;
    expect(received).toBe(TOTAL);
    expect(written).toBe(TOTAL);
  });
});
