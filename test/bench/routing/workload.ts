// The routing bench's arrival trace: pure and seeded, so every policy replays exactly the same requests at the same
// offsets. Requests arrive as a Poisson process at the target rate; each arrival is the next turn of a chat (chats
// share a few long system prompts, and each turn carries the conversation so far), a single long prompt or a single
// short one. Text is made of four-letter words, each exactly one token under the sim's tokenizer (a space and 1 to 4
// letters), so prompt sizes are known in tokens; an answer of N tokens is what the sim writes for max_tokens N
// ("tok0 tok1 … tok9 tok0 …"), so a later turn carries the exact tokens the engine produced and the trace does not
// depend on the answers.

import { type RandomSource, seededRandom } from '../../../daemons/shared/seeded-random.ts';

/** Uniform in [0, 1). */
export type Random = RandomSource;

export interface ChatMessage {
  readonly role: 'system' | 'user' | 'assistant';
  readonly content: string;
}

export type RequestKind = 'chat' | 'long' | 'short';

export interface TraceRequest {
  /** Position in the trace. */
  readonly index: number;
  /** Milliseconds from the start of the trace. */
  readonly atMs: number;
  readonly kind: RequestKind;
  /** The chat this turn belongs to (chat requests only): sent as the session header where a policy uses it. */
  readonly session?: string;
  /** 0-based turn of its chat. */
  readonly turn?: number;
  readonly messages: readonly ChatMessage[];
  readonly maxTokens: number;
  /** Prompt words (one token each), system prompt and history included; the chat template adds a few more. */
  readonly promptWords: number;
  /** Of those, the shared system prompt's (0 for a single prompt). */
  readonly systemWords: number;
  readonly stream: boolean;
}

export interface WorkloadShape {
  /** Requests per second (the Poisson rate). */
  readonly rate: number;
  readonly durationMs: number;
  readonly seed: number;
  /** Distinct long system prompts the chats share. */
  readonly systemPrompts: number;
  readonly systemPromptWords: readonly [number, number];
  readonly turnsPerChat: readonly [number, number];
  readonly userWords: readonly [number, number];
  /** A chat's next turn arrives no sooner than this after its previous one (the user reads and types). */
  readonly thinkMs: number;
  readonly longWords: readonly [number, number];
  readonly shortWords: readonly [number, number];
  readonly outputTokens: readonly [number, number];
  /** Fractions of arrivals that are single long and single short prompts; the rest are chat turns. */
  readonly longShare: number;
  readonly shortShare: number;
  /** Fraction of requests sent non-streaming (the rest stream, so their TTFT is measured). */
  readonly nonStreamingShare: number;
}

export const DEFAULT_SHAPE: Omit<WorkloadShape, 'rate' | 'durationMs' | 'seed'> = {
  systemPrompts: 8,
  systemPromptWords: [400, 800],
  turnsPerChat: [3, 7],
  userWords: [40, 120],
  thinkMs: 1500,
  longWords: [1200, 1800],
  shortWords: [20, 60],
  outputTokens: [24, 48],
  longShare: 0.1,
  shortShare: 0.2,
  nonStreamingShare: 0,
};

const LETTERS = 'abcdefghijklmnopqrstuvwxyz';

function between(random: Random, [lo, hi]: readonly [number, number]): number {
  return lo + Math.floor(random() * (hi - lo + 1));
}

/** `count` seeded four-letter words: `count` tokens under the sim's tokenizer. */
export function words(random: Random, count: number): string {
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    let w = '';
    for (let j = 0; j < 4; j++) w += LETTERS[Math.floor(random() * LETTERS.length)];
    out.push(w);
  }
  return out.join(' ');
}

/**
 * A message's label (`system 3:`, `turn 0:`) and its tokens: the word in chunks of 4 letters, the number (with its
 * space) in chunks of 4 digits, and the colon.
 */
function label(word: string, n: number): { text: string; tokens: number } {
  return { text: `${word} ${n}:`, tokens: Math.ceil(word.length / 4) + Math.ceil(String(n).length / 4) + 1 };
}

/** The sim's answer to a request with max_tokens `n`: its i-th token is `tok{i mod 10}`, after the first with a space. */
export function simAnswer(n: number): string {
  return Array.from({ length: n }, (_, i) => `tok${i % 10}`).join(' ');
}

/** Exponential inter-arrival gap of a Poisson process of `rate` per second, in ms. */
function gapMs(random: Random, rate: number): number {
  return (-Math.log(1 - random()) / rate) * 1000;
}

interface OpenChat {
  readonly session: string;
  readonly turns: number;
  readonly messages: ChatMessage[];
  readonly promptWords: number[];
  next: number;
  lastAtMs: number;
}

/**
 * The trace: Poisson arrivals at `shape.rate` over `shape.durationMs`. A chat arrival is the next turn of the open
 * chat that has waited longest past its think time, else the first turn of a new chat (its system prompt drawn from
 * the shared few), so chats interleave as real users' do.
 */
export function buildTrace(shape: WorkloadShape): TraceRequest[] {
  if (!(shape.rate > 0) || !(shape.durationMs > 0))
    throw new RangeError(`rate and durationMs must be positive, got ${shape.rate} and ${shape.durationMs}`);
  if (shape.longShare < 0 || shape.shortShare < 0 || shape.longShare + shape.shortShare > 1)
    throw new RangeError('longShare and shortShare must be fractions that sum to at most 1');
  const random = seededRandom(shape.seed);
  // The system prompts come from their own stream, so they are the same at every rate of one seed.
  const promptRandom = seededRandom(shape.seed ^ 0x5f3759df);
  const systems = Array.from({ length: shape.systemPrompts }, (_, i) => {
    const n = between(promptRandom, shape.systemPromptWords);
    const l = label('system', i);
    return { content: `${l.text} ${words(promptRandom, n)}`, words: n + l.tokens };
  });
  const open: OpenChat[] = [];
  const trace: TraceRequest[] = [];
  let chats = 0;
  let atMs = gapMs(random, shape.rate);
  while (atMs < shape.durationMs) {
    const draw = random();
    const stream = random() >= shape.nonStreamingShare;
    const maxTokens = between(random, shape.outputTokens);
    const index = trace.length;
    if (draw < shape.longShare + shape.shortShare) {
      const kind: RequestKind = draw < shape.longShare ? 'long' : 'short';
      const n = between(random, kind === 'long' ? shape.longWords : shape.shortWords);
      const l = label(kind, index);
      trace.push({
        index,
        atMs,
        kind,
        messages: [{ role: 'user', content: `${l.text} ${words(random, n)}` }],
        maxTokens,
        promptWords: n + l.tokens,
        systemWords: 0,
        stream,
      });
    } else {
      let chat = open.filter((c) => atMs - c.lastAtMs >= shape.thinkMs).sort((a, b) => a.lastAtMs - b.lastAtMs)[0];
      if (chat === undefined) {
        const system = systems[Math.floor(random() * systems.length)]!;
        chat = {
          session: `chat-${shape.seed}-${chats++}`,
          turns: between(random, shape.turnsPerChat),
          messages: [{ role: 'system', content: system.content }],
          promptWords: [system.words],
          next: 0,
          lastAtMs: atMs,
        };
        open.push(chat);
      }
      const n = between(random, shape.userWords);
      const l = label('turn', chat.next);
      chat.messages.push({ role: 'user', content: `${l.text} ${words(random, n)}` });
      chat.promptWords.push(n + l.tokens);
      const turn = chat.next;
      trace.push({
        index,
        atMs,
        kind: 'chat',
        session: chat.session,
        turn,
        messages: [...chat.messages],
        maxTokens,
        promptWords: chat.promptWords.reduce((a, b) => a + b, 0),
        systemWords: chat.promptWords[0]!,
        stream,
      });
      chat.messages.push({ role: 'assistant', content: simAnswer(maxTokens) });
      chat.promptWords.push(maxTokens);
      chat.next++;
      chat.lastAtMs = atMs;
      if (chat.next >= chat.turns) open.splice(open.indexOf(chat), 1);
    }
    atMs += gapMs(random, shape.rate);
  }
  return trace;
}

/**
 * Mean prompt words (in all, and less the shared system prompt) and output tokens of a shape's requests, from a long
 * trace of it (for the capacity).
 */
export function meanRequest(shape: Omit<WorkloadShape, 'rate' | 'durationMs'>): {
  promptTokens: number;
  unsharedPromptTokens: number;
  outputTokens: number;
} {
  const trace = buildTrace({ ...shape, rate: 10, durationMs: 600_000 });
  const n = trace.length;
  return {
    promptTokens: trace.reduce((a, r) => a + r.promptWords, 0) / n,
    unsharedPromptTokens: trace.reduce((a, r) => a + r.promptWords - r.systemWords, 0) / n,
    outputTokens: trace.reduce((a, r) => a + r.maxTokens, 0) / n,
  };
}

/**
 * The share of the trace's prompt words that an earlier request of the trace already carried as a prefix: a later
 * chat turn's whole previous turn (prompt and answer), a first turn's system prompt when an earlier chat used it. No
 * router can make the prefix-cache hit rate higher than this (the chat template's few tokens aside).
 */
export function reusableShare(trace: readonly TraceRequest[]): number {
  const seenSystems = new Set<string>();
  const previous = new Map<string, number>();
  let reusable = 0;
  let total = 0;
  for (const r of trace) {
    total += r.promptWords;
    if (r.kind !== 'chat' || r.session === undefined) continue;
    const system = r.messages[0]!.content;
    const before = previous.get(r.session);
    if (before !== undefined) reusable += before;
    else if (seenSystems.has(system)) reusable += r.systemWords;
    seenSystems.add(system);
    previous.set(r.session, r.promptWords + r.maxTokens);
  }
  return total === 0 ? 0 : reusable / total;
}
