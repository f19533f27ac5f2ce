// Prefix affinity, rule by rule (reference praxis-proxy/grid docs/architecture/prefix-affinity.md): what the block
// keys depend on, what the per-cluster memory keeps and for how long, and when a request stays on its sticky site.
import { describe, expect, it } from 'vitest';
import { BLOCK_BYTES, MAX_KEYS, promptKeys } from '../../../daemons/gateway/site-route/prefix-keys.ts';
import {
  BLOCKS_PER_CLUSTER,
  DEFAULT_PREFIX_AFFINITY,
  PrefixMemory,
  affinityStep,
  matchWorth,
  prefixSettings,
} from '../../../daemons/gateway/site-route/prefix-affinity.ts';

const long = (n: number, seed = 'x'): string =>
  `${seed}${'lorem ipsum dolor sit amet '.repeat(Math.ceil(n / 27))}`.slice(0, n);
const chat = (messages: unknown[], extra: Record<string, unknown> = {}) => ({ model: 'm', messages, ...extra });
const keysOf = (path: string, body: unknown, model = 'm') => promptKeys(path, body, model)?.keys;

describe('block keys', () => {
  it('"hashes the prompt in 256-byte blocks": a 10 KiB system prompt gives about 40 keys, each naming its whole prefix', () => {
    const keys = keysOf('/v1/chat/completions', chat([{ role: 'system', content: long(10_240) }]))!;
    expect(keys.length).toBe(Math.floor((10_240 + '\u0001system\u0001'.length) / BLOCK_BYTES));
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('a later turn extends the keys of the turn before (the prefix stays the same)', () => {
    const first = [
      { role: 'system', content: long(4000) },
      { role: 'user', content: 'hi' },
    ];
    const a = keysOf('/v1/chat/completions', chat(first))!;
    const b = keysOf(
      '/v1/chat/completions',
      chat([...first, { role: 'assistant', content: long(2000, 'y') }, { role: 'user', content: 'more' }]),
    )!;
    expect(b.slice(0, a.length)).toEqual(a);
    expect(b.length).toBeGreaterThan(a.length);
  });

  it.each([
    ['"It ignores ... generation parameters"', { temperature: 0.2, max_tokens: 9, stream: true }],
    ['"It ignores ... field order" (of the body)', { n: 1 }],
  ])('%s', (_rule, extra) => {
    const messages = [{ role: 'user', content: long(3000) }];
    expect(keysOf('/v1/chat/completions', chat(messages, extra))).toEqual(
      keysOf('/v1/chat/completions', { messages, model: 'm' }),
    );
  });

  it('"It ignores reasoning"', () => {
    const plain = [{ role: 'assistant', content: [{ type: 'text', text: long(2000) }] }];
    const withThinking = [
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'hmm' },
          { type: 'text', text: long(2000) },
        ],
      },
    ];
    expect(keysOf('/v1/messages', { model: 'm', messages: withThinking })).toEqual(
      keysOf('/v1/messages', { model: 'm', messages: plain }),
    );
  });

  it('"tool definitions with their keys sorted"', () => {
    const tool = { type: 'function', function: { name: 'f', parameters: { b: 1, a: long(2000) } } };
    const reordered = { function: { parameters: { a: long(2000), b: 1 }, name: 'f' }, type: 'function' };
    const m = [{ role: 'user', content: 'q' }];
    expect(keysOf('/v1/chat/completions', chat(m, { tools: [tool] }))).toEqual(
      keysOf('/v1/chat/completions', chat(m, { tools: [reordered] })),
    );
  });

  it('"A cache_salt gives its own keys, and so does each model."', () => {
    const body = chat([{ role: 'user', content: long(3000) }]);
    const base = keysOf('/v1/chat/completions', body)!;
    expect(keysOf('/v1/chat/completions', { ...body, cache_salt: 's' })![0]).not.toBe(base[0]);
    expect(keysOf('/v1/chat/completions', body, 'other')![0]).not.toBe(base[0]);
  });

  it('"Each image, audio, video, or file part counts as one fixed digest, by vLLM\'s uuid when the part has one"', () => {
    const withImage = (url: string, uuid?: string) =>
      chat([
        {
          role: 'user',
          content: [
            { type: 'image_url', image_url: { url }, ...(uuid === undefined ? {} : { uuid }) },
            { type: 'text', text: long(2000) },
          ],
        },
      ]);
    expect(keysOf('/v1/chat/completions', withImage('data:a', 'u1'))).toEqual(
      keysOf('/v1/chat/completions', withImage('data:b', 'u1')),
    );
    expect(keysOf('/v1/chat/completions', withImage('data:a'))).not.toEqual(
      keysOf('/v1/chat/completions', withImage('data:b')),
    );
  });

  it.each([
    ['"token arrays" get no keys', '/v1/completions', { model: 'm', prompt: [1, 2, 3] }],
    [
      '"a part type it does not know" gets no keys',
      '/v1/chat/completions',
      chat([{ role: 'user', content: [{ type: 'hologram' }] }]),
    ],
    ['"A body it cannot read" gets no keys', '/v1/chat/completions', 'not an object'],
    ['messages that are not a list get no keys', '/v1/chat/completions', { model: 'm', messages: 'hi' }],
    ['an unknown path gets no keys', '/v1/embeddings', { model: 'm', input: long(3000) }],
  ])('%s', (_rule, path, body) => {
    expect(promptKeys(path, body, 'm')).toBeUndefined();
  });

  it.each([
    ['Completions (prompt)', '/v1/completions', { model: 'm', prompt: long(3000) }],
    [
      'Responses (instructions and input items, with a function call)',
      '/v1/responses',
      {
        model: 'm',
        instructions: long(1500),
        input: [
          { role: 'user', content: [{ type: 'input_text', text: long(1500) }] },
          { type: 'function_call', name: 'f', arguments: '{}' },
        ],
      },
    ],
    ['Responses (input string)', '/v1/responses', { model: 'm', input: long(3000) }],
    [
      'Anthropic Messages (system and messages)',
      '/v1/messages',
      { model: 'm', system: long(1500), messages: [{ role: 'user', content: long(1500) }] },
    ],
    [
      'Chat Completions with tool calls',
      '/v1/chat/completions',
      chat([
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: '1', type: 'function', function: { name: 'f', arguments: long(3000) } }],
        },
      ]),
    ],
  ])('keys %s', (_name, path, body) => {
    expect(promptKeys(path, body, 'm')!.keys.length).toBeGreaterThanOrEqual(10);
  });

  it('"at most 512 keys per request"', () => {
    expect(keysOf('/v1/completions', { model: 'm', prompt: long(600 * BLOCK_BYTES) })!.length).toBe(MAX_KEYS);
  });
});

describe('per-cluster memory', () => {
  const keys = ['k1', 'k2', 'k3', 'k4', 'k5'];
  it('"A block counts toward a match only once the site answers with success"', () => {
    const memory = new PrefixMemory();
    memory.sent('c', keys, 0);
    expect(memory.run('c', keys, 1)).toBe(0);
    memory.confirmed('c', keys, 2);
    expect(memory.run('c', keys, 3)).toBe(5);
    expect(memory.run('c', ['k1', 'k2', 'other', 'k4'], 3)).toBe(2);
  });
  it('"the gateway drops it when the site answers 429 or 5xx"', () => {
    const memory = new PrefixMemory();
    memory.confirmed('c', keys, 0);
    memory.dropped('c', keys.slice(2));
    expect(memory.run('c', keys, 1)).toBe(2);
  });
  it('"A block with no answer yet lasts 30s, and a confirmed one 10 minutes"; a resend does not unconfirm a block', () => {
    const memory = new PrefixMemory();
    memory.confirmed('c', keys, 0);
    memory.sent('c', keys, 1000);
    expect(memory.run('c', keys, 599_999)).toBe(5);
    expect(memory.run('c', keys, 600_000)).toBe(0);
  });
  it('"Each cluster remembers 16,384 blocks" (the least recently written goes first)', () => {
    const memory = new PrefixMemory();
    const many = Array.from({ length: BLOCKS_PER_CLUSTER + 10 }, (_, i) => `b${i}`);
    memory.confirmed('c', many, 0);
    expect(memory.size('c')).toBe(BLOCKS_PER_CLUSTER);
    expect(memory.run('c', ['b0'], 1)).toBe(0);
    expect(memory.run('c', [`b${BLOCKS_PER_CLUSTER + 9}`], 1)).toBe(1);
    expect(memory.size('other')).toBe(0);
  });
});

describe('the affinity step', () => {
  const S = DEFAULT_PREFIX_AFFINITY;
  const never = (): number => 0.5;
  it('has the reference defaults', () => {
    expect(prefixSettings(undefined)).toEqual({
      enabled: true,
      threshold: 0.8,
      exploration: 0.02,
      prefill_tokens_per_second: 10_000,
      queued_request_seconds: 2,
    });
  });
  it('"A 40-block match saves about 2,560 tokens, or 0.26s at the defaults, which is worth 0.13 of a queued request. A 400-block match is worth 1.3."', () => {
    expect(matchWorth(40, S)).toBeCloseTo(0.128, 3);
    expect(matchWorth(400, S)).toBeCloseTo(1.28, 2);
  });
  it.each([
    [
      '"A site is sticky when it holds the longest run of the request\'s blocks"',
      [
        { run: 10, queue: 0 },
        { run: 3, queue: 0 },
      ],
      12,
      'sticky',
      [0],
    ],
    [
      '"That run must cover 80 percent of the prompt"',
      [
        { run: 9, queue: 0 },
        { run: 0, queue: 0 },
      ],
      12,
      'no_match',
      [],
    ],
    [
      '"or 32 blocks"',
      [
        { run: 32, queue: 0 },
        { run: 0, queue: 0 },
      ],
      400,
      'sticky',
      [0],
    ],
    [
      '"A run under 4 blocks never counts, so identical short prompts spread by load"',
      [
        { run: 3, queue: 0 },
        { run: 0, queue: 0 },
      ],
      3,
      'no_match',
      [],
    ],
    [
      'sites tied on the longest run are all sticky',
      [
        { run: 10, queue: 1 },
        { run: 10, queue: 0 },
        { run: 2, queue: 0 },
      ],
      10,
      'sticky',
      [0, 1],
    ],
    [
      '"The sticky set reopens when the best sticky site\'s queue is deeper than the best other site\'s by more than the match is worth"',
      [
        { run: 40, queue: 1 },
        { run: 0, queue: 0.5 },
      ],
      40,
      'load_override',
      [],
    ],
    [
      'a queue deeper by less than the match is worth keeps it sticky',
      [
        { run: 400, queue: 1.5 },
        { run: 0, queue: 0.5 },
      ],
      400,
      'sticky',
      [0],
    ],
    [
      '"An unmeasured sticky site gives way to a measured one"',
      [
        { run: 40, queue: undefined },
        { run: 0, queue: 2 },
      ],
      40,
      'load_override',
      [],
    ],
    [
      '"No readable prompt": not_applicable',
      [
        { run: 0, queue: 0 },
        { run: 0, queue: 0 },
      ],
      undefined,
      'not_applicable',
      [],
    ],
  ] as const)('%s', (_rule, candidates, total, outcome, sticky) => {
    expect(affinityStep(candidates, total, S, never)).toEqual({ outcome, sticky });
  });
  it('"Two percent of requests skip affinity, so a second site learns a shared prompt"', () => {
    expect(
      affinityStep(
        [
          { run: 40, queue: 0 },
          { run: 0, queue: 0 },
        ],
        40,
        S,
        () => 0.019,
      ).outcome,
    ).toBe('exploration');
    expect(
      affinityStep(
        [
          { run: 40, queue: 0 },
          { run: 0, queue: 0 },
        ],
        40,
        S,
        () => 0.02,
      ).outcome,
    ).toBe('sticky');
  });
});
