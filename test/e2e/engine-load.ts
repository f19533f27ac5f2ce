// Real load on a sim's engine, as another client of the same backend would put it there: long non-streaming chat
// completions held open, so they run in its batch or wait in its queue and the engine's own /metrics report them.
// Non-streaming on purpose: a hundred SSE streams would spend this machine's two cores writing tokens.
import { request } from 'node:http';

export interface HeldLoad {
  /** Requests the sim answered or refused before they were released (each a load that stopped holding). */
  readonly ended: () => number;
  /** Drops every open request (the sim sees its clients go and frees their blocks). */
  release(): void;
}

export function holdEngineLoad(options: {
  address: string;
  token: string;
  model: string;
  count: number;
  maxTokens: number;
}): HeldLoad {
  const [host = '127.0.0.1', port = '0'] = options.address.split(':');
  let ended = 0;
  const requests = new Set<ReturnType<typeof request>>();
  const body = JSON.stringify({
    model: options.model,
    max_tokens: options.maxTokens,
    messages: [{ role: 'user', content: 'Write a long story about a grid of inference engines.' }],
  });
  for (let i = 0; i < options.count; i++) {
    // One connection per request (agent false): the sim holds each as its own client.
    const req = request(
      {
        host: host === '0.0.0.0' ? '127.0.0.1' : host,
        port: Number(port),
        method: 'POST',
        path: '/v1/chat/completions',
        agent: false,
        headers: { authorization: `Bearer ${options.token}`, 'content-type': 'application/json' },
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          if (requests.delete(req)) ended++;
        });
      },
    );
    req.on('error', () => {
      if (requests.delete(req)) ended++;
    });
    requests.add(req);
    req.end(body);
  }
  return {
    ended: () => ended,
    release() {
      for (const req of requests) req.destroy();
      requests.clear();
    },
  };
}
