// Reading an HTTP request body up to a bound, shared by the gateway's request parser and the operator's gateway age
// ingest: a declared Content-Length over the bound is refused before any byte is read, and a chunked body is cut off
// at the first chunk that crosses it, so no listener buffers more than its bound.
import type { IncomingMessage } from 'node:http';

/** Reads `req` whole; rejects with `tooLarge(maxBytes)` past `maxBytes`, or with an Error if the client hangs up. */
export function readBoundedBody(req: IncomingMessage, maxBytes: number, tooLarge: (maxBytes: number) => Error): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > maxBytes) return Promise.reject(tooLarge(maxBytes));
  // Event listeners rather than an async iterator: this runs on every gateway request and the iterator costs more.
  return new Promise<Buffer>((resolve, reject) => {
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
      if (!req.complete) onError(new Error('client closed the connection before sending the whole body'));
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
  });
}
