import { expect, test } from 'vitest';
import { DropCounter } from '../../daemons/gossip-operator/swim/drop-counter.ts';

function recorder() {
  const lines: { level: string; msg: string; obj: object }[] = [];
  return {
    lines,
    logger: {
      warn: (obj: object, msg: string) => void lines.push({ level: 'warn', msg, obj }),
      debug: (obj: object, msg: string) => void lines.push({ level: 'debug', msg, obj }),
    },
  };
}

test('a drop the protocol recovers from is counted and emitted but logged at debug, once', () => {
  const log = recorder();
  const drops = new DropCounter('swim', ['broadcast_too_large', 'bad_frame'] as const, log.logger);
  const events: string[] = [];
  drops.on('drop', (e) => events.push(e.reason));
  for (let i = 0; i < 3; i += 1)
    drops.drop(
      'broadcast_too_large',
      'broadcast u:x is 9000 bytes, more than one packet; push-pull carries it instead',
      'debug',
    );
  expect(drops.count('broadcast_too_large')).toBe(3);
  expect(events).toEqual(['broadcast_too_large', 'broadcast_too_large', 'broadcast_too_large']);
  expect(log.lines.map((l) => l.level)).toEqual(['debug']);
  expect(JSON.stringify(log.lines[0]?.obj)).toContain('push-pull carries it');
  drops.drop('bad_frame', 'short frame');
  drops.drop('bad_frame', 'short frame');
  expect(log.lines.map((l) => l.level)).toEqual(['debug', 'warn']);
});

test('a logger without debug gets no line for a debug-level drop', () => {
  const warns: string[] = [];
  const drops = new DropCounter('swim', ['broadcast_too_large'] as const, { warn: (_o, msg) => void warns.push(msg) });
  drops.drop('broadcast_too_large', 'big', 'debug');
  expect(warns).toEqual([]);
  expect(drops.count('broadcast_too_large')).toBe(1);
});
