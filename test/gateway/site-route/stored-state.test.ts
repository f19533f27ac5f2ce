// Stored-state pinning, rule by rule (reference praxis-proxy/grid docs/architecture/prefix-affinity.md, "Stored
// responses and conversations"): ids tagged on the way out, streamed too, and routed and stripped on the way in.
import { describe, expect, it } from 'vitest';
import {
  IdTagger,
  PinConflict,
  parseTaggedId,
  pinOf,
  tagId,
} from '../../../daemons/gateway/site-route/stored-state.ts';

describe('tagged ids', () => {
  it.each([
    ['resp_east.abc123', { site: 'east', id: 'resp_abc123' }],
    ['conv_site-b.x.y', { site: 'site-b', id: 'conv_x.y' }],
    ['resp_abc123', undefined],
    ['resp_.abc', undefined],
    ['resp_East.abc', undefined],
    ['resp_east.', undefined],
    ['msg_east.abc', undefined],
  ])('"resp_<site>.<id> and conv_<site>.<id>": %s', (value, expected) => {
    expect(parseTaggedId(value)).toEqual(expected);
  });
  it('tags resp_ and conv_ ids and leaves others alone', () => {
    expect(tagId('resp_1', 'west')).toBe('resp_west.1');
    expect(tagId('conv_1', 'west')).toBe('conv_west.1');
    expect(tagId('msg_1', 'west')).toBe('msg_1');
    expect(parseTaggedId(tagId('resp_a.b', 'west'))).toEqual({ site: 'west', id: 'resp_a.b' });
  });
});

describe('pinOf: "A request naming one goes only to that site, with the tag stripped"', () => {
  it.each([
    [
      'previous_response_id',
      '/v1/responses',
      { model: 'm', previous_response_id: 'resp_b.r1' },
      { site: 'b', body: { model: 'm', previous_response_id: 'resp_r1' }, target: null },
    ],
    [
      'conversation as a string',
      '/v1/responses',
      { model: 'm', conversation: 'conv_b.c1' },
      { site: 'b', body: { model: 'm', conversation: 'conv_c1' }, target: null },
    ],
    [
      'conversation as {id}',
      '/v1/responses',
      { model: 'm', conversation: { id: 'conv_b.c1' } },
      { site: 'b', body: { model: 'm', conversation: { id: 'conv_c1' } }, target: null },
    ],
    [
      'a stored response in the path',
      '/v1/responses/resp_b.r1/input_items?limit=2',
      undefined,
      { site: 'b', body: null, target: '/v1/responses/resp_r1/input_items?limit=2' },
    ],
    [
      'a conversation in the path',
      '/v1/conversations/conv_b.c1/items',
      undefined,
      { site: 'b', body: null, target: '/v1/conversations/conv_c1/items' },
    ],
    ['an untagged id pins nothing', '/v1/responses', { model: 'm', previous_response_id: 'resp_r1' }, undefined],
    ['no stored state', '/v1/chat/completions', { model: 'm' }, undefined],
  ] as const)('%s', (_name, target, body, expected) => {
    expect(pinOf(target, body as Record<string, unknown> | undefined)).toEqual(expected);
  });
  it('refuses a request naming stored state of two sites', () => {
    expect(() => pinOf('/v1/responses', { previous_response_id: 'resp_a.1', conversation: 'conv_b.2' })).toThrow(
      PinConflict,
    );
    expect(pinOf('/v1/responses/resp_a.1', { previous_response_id: 'resp_a.2' })?.site).toBe('a');
  });
});

describe('IdTagger: "Response and conversation ids leave the gateway tagged with the site that stored them"', () => {
  const body = Buffer.from(
    'event: response.created\ndata: {"type":"response.created","response":{"id":"resp_1f","previous_response_id":"resp_0a","conversation":{"id":"conv_9"},"output":[{"id":"msg_1","text":"say \\"resp_x\\""}]}}\n\n',
  );
  const expected = body
    .toString()
    .replace('"resp_1f"', '"resp_b.1f"')
    .replace('"resp_0a"', '"resp_b.0a"')
    .replace('"conv_9"', '"conv_b.9"');
  it('rewrites a whole body, and leaves an escaped quote inside generated text alone', () => {
    const tagger = new IdTagger('b');
    expect(Buffer.concat([tagger.push(body), tagger.end()]).toString()).toBe(expected);
  });
  it('rewrites the same at every split point of a streamed body (a pattern cut across chunks)', () => {
    for (let cut = 0; cut <= body.length; cut++) {
      const tagger = new IdTagger('b');
      const out = Buffer.concat([
        tagger.push(body.subarray(0, cut)),
        tagger.push(body.subarray(cut)),
        tagger.end(),
      ]).toString();
      expect(out, `cut at ${cut}`).toBe(expected);
    }
  });
  it('rewrites byte by byte', () => {
    const tagger = new IdTagger('b');
    const parts: Buffer[] = [];
    for (let i = 0; i < body.length; i++) parts.push(tagger.push(body.subarray(i, i + 1)));
    parts.push(tagger.end());
    expect(Buffer.concat(parts).toString()).toBe(expected);
  });
});
