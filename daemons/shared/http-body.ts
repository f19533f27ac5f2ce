// Reading an HTTP request body up to a bound, shared by the gateway's request parser and the operator's gateway age
// ingest: a declared Content-Length over the bound is refused before any byte is read, and a chunked body is cut off
// at the first chunk that crosses it, so no listener buffers more than its bound.
import type { IncomingMessage } from 'node:http';

const EMPTY = Buffer.alloc(0);
const CLOSED_EARLY = 'client closed the connection before sending the whole body';

/** Reads `req` whole; rejects with `tooLarge(maxBytes)` past `maxBytes`, or with an Error if the client hangs up. */
export function readBoundedBody(req: IncomingMessage, maxBytes: number, tooLarge: (maxBytes: number) => Error): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > maxBytes) return Promise.reject(tooLarge(maxBytes));
  // A small body usually arrives in the same read as the head. The 'request' event fires before the parser reaches
  // the body (and ticks and microtasks run before it does), but by the check phase of the same turn of the event loop
  // the parser has buffered the body whole and ended the stream: it is then taken with one read(), without flowing
  // mode, 'data' and 'end' events, four listeners and their ticks.
  return new Promise<Buffer>((resolve, reject) => setImmediate(takeBody, req, maxBytes, tooLarge, resolve, reject));
}

function takeBody(req: IncomingMessage, maxBytes: number, tooLarge: (maxBytes: number) => Error, resolve: (body: Buffer) => void, reject: (error: Error) => void): void {
  if (req.destroyed) reject(new Error(CLOSED_EARLY));
  else if (req.complete && req.readableLength <= maxBytes) resolve((req.read() as Buffer | null) ?? EMPTY);
  else readByEvents(req, maxBytes, tooLarge, resolve, reject);
}

/** The body still arriving (or buffered over the bound): read as it flows, cut off at the first chunk past the bound. */
function readByEvents(req: IncomingMessage, maxBytes: number, tooLarge: (maxBytes: number) => Error, resolve: (body: Buffer) => void, reject: (error: Error) => void): void {
  const chunks: Buffer[] = [];
  let total = 0;
  const onData = (chunk: Buffer): void => {
    total += chunk.length;
    if (total > maxBytes) {
      cleanup();
      req.resume();
      reject(tooLarge(maxBytes));
      return;
    }
    chunks.push(chunk);
  };
  const onEnd = (): void => {
    cleanup();
    resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total));
  };
  const onError = (error: Error): void => {
    cleanup();
    reject(error);
  };
  const onClose = (): void => {
    if (!req.complete) onError(new Error(CLOSED_EARLY));
  };
  const cleanup = (): void => {
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('error', onError);
    req.off('close', onClose);
  };
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('error', onError);
  req.on('close', onClose);
}
