// Reading an HTTP request body up to a bound, shared by the gateway's request parser and the operator's gateway age
// ingest: a declared Content-Length over the bound is refused before any byte is read, and a chunked body is cut off
// at the first chunk that crosses it, so no listener buffers more than its bound.
import type { IncomingMessage } from 'node:http';

const EMPTY = Buffer.alloc(0);
const CLOSED_EARLY = 'client closed the connection before sending the whole body';

/** Reads `req` whole; rejects with `tooLarge(maxBytes)` past `maxBytes`, or with an Error if the client hangs up. */
export function readBoundedBody(
  req: IncomingMessage,
  maxBytes: number,
  tooLarge: (maxBytes: number) => Error,
): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > maxBytes) return Promise.reject(tooLarge(maxBytes));
  // The length a whole body has when the request declares one (-1 for a chunked body, which is whole only once the
  // parser has seen its end).
  const length = declared === undefined ? -1 : Number(declared);
  return new Promise<Buffer>((resolve, reject) => {
    // Already parsed whole (a caller that awaited something first): taken at once.
    if (req.complete) return takeBody(req, length, maxBytes, tooLarge, resolve, reject);
    // A small body usually arrives in the same read as the head. The 'request' event fires before the parser reaches
    // the body, and 'readable' once it has parsed a body chunk (or the end of an empty body), a tick later in the same
    // turn of the event loop: a body that came with its head is then all buffered and taken with one read(), without
    // flowing mode, 'data' and 'end' events and their ticks. (Waiting for the check phase instead also finds the body
    // whole, but it saves fewer instructions and holds each request's dispatch until the loop has handled everything
    // else that turn read: `npm run bench:gateway-instructions` and `npm run bench:gateway`.)
    const onReadable = (): void => {
      req.off('close', onClose);
      takeBody(req, length, maxBytes, tooLarge, resolve, reject);
    };
    const onClose = (): void => {
      req.off('readable', onReadable);
      reject(new Error(CLOSED_EARLY));
    };
    req.once('readable', onReadable);
    req.once('close', onClose);
  });
}

/** Takes the body when it is all buffered (complete, or the declared length), else reads the rest as it flows. */
function takeBody(
  req: IncomingMessage,
  length: number,
  maxBytes: number,
  tooLarge: (maxBytes: number) => Error,
  resolve: (body: Buffer) => void,
  reject: (error: Error) => void,
): void {
  const buffered = req.readableLength;
  if (req.destroyed) reject(new Error(CLOSED_EARLY));
  else if ((req.complete || buffered === length) && buffered <= maxBytes)
    resolve((req.read() as Buffer | null) ?? EMPTY);
  else readByEvents(req, maxBytes, tooLarge, resolve, reject);
}

/** The body still arriving (or buffered over the bound): read as it flows, cut off at the first chunk past the bound. */
function readByEvents(
  req: IncomingMessage,
  maxBytes: number,
  tooLarge: (maxBytes: number) => Error,
  resolve: (body: Buffer) => void,
  reject: (error: Error) => void,
): void {
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
