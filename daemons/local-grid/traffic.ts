/**
 * Client side of the local grid: one chat completion through a consumer gateway, reporting which provider answered
 * (the sims' x-sim-provider header), and a poll-with-deadline that says what it waited for.
 */

export interface ChatResult {
  readonly status: number;
  /** x-sim-provider of the answer: the backend that served it (undefined when no backend answered). */
  readonly provider?: string;
  readonly body: string;
  readonly ms: number;
}

export const CHAT_BODY = (model: string) =>
  JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hello from the grid.' }] });

/** `apiKey`: the caller key a consumer with caller_auth requires (LocalGrid.demoKey()), sent as a bearer token. */
export async function chatCompletion(
  listen: string,
  model: string,
  timeoutMs = 10_000,
  apiKey?: string,
): Promise<ChatResult> {
  const started = performance.now();
  try {
    const response = await fetch(`http://${listen}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` }),
      },
      body: CHAT_BODY(model),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const body = await response.text();
    const provider = response.headers.get('x-sim-provider') ?? undefined;
    return {
      status: response.status,
      ...(provider !== undefined ? { provider } : {}),
      body,
      ms: performance.now() - started,
    };
  } catch (error) {
    return { status: 0, body: (error as Error).message, ms: performance.now() - started };
  }
}

/** The curl a user can paste to send the same request (with the caller key, for the terminal of who ran `agn up` only). */
export function curlFor(listen: string, model: string, apiKey?: string): string {
  const auth = apiKey === undefined ? '' : ` -H 'authorization: Bearer ${apiKey}'`;
  return `curl -sS -i http://${listen}/v1/chat/completions -H 'content-type: application/json'${auth} -d '${CHAT_BODY(model)}'`;
}

/**
 * The fleet dashboard on an operator's admin listener (a wildcard bind is reached on loopback). With the token of a
 * token-access dashboard the URL opens it once: the operator answers with a session cookie and a redirect that drops
 * the token from the address bar (for the terminal of who ran `agn up` only).
 */
export function dashboardUrl(adminAddress: string, token?: string): string {
  const base = `http://${adminAddress.replace(/^0\.0\.0\.0:/, '127.0.0.1:')}/dashboard/`;
  return token === undefined ? base : `${base}?token=${encodeURIComponent(token)}`;
}

export { waitFor } from '../shared/wait-for.ts';

/** Sends `count` requests one after another; returns how many each provider served (and "status <n>" for failures). */
export async function attribution(
  listen: string,
  model: string,
  count: number,
  apiKey?: string,
): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (let i = 0; i < count; i++) {
    const result = await chatCompletion(listen, model, 10_000, apiKey);
    const key = result.status === 200 && result.provider !== undefined ? result.provider : `status ${result.status}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}
