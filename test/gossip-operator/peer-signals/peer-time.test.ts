// The PeerTimeValid state machine against the sentences it implements (quoted in peer-time.ts).
import { describe, expect, it } from 'vitest';
import {
  conditionWriteDue,
  initialPeerTimeState,
  observeRound,
  peerTimeCondition,
  type PeerAnswer,
  type PeerTimeCondition,
  type PeerTimeState,
} from '../../../daemons/gossip-operator/peer-signals/peer-time.ts';

const clean: PeerAnswer = { kind: 'answered', rejectedRows: 0 };
const skewed: PeerAnswer = { kind: 'answered', rejectedRows: 2 };
const silent: PeerAnswer = { kind: 'no_answer' };

interface Round {
  members: string[];
  answers?: Record<string, PeerAnswer>;
  secure?: boolean;
}

function run(rounds: Round[], stored?: PeerTimeCondition): PeerTimeState {
  let state = initialPeerTimeState(stored);
  for (const r of rounds) {
    state = observeRound(state, {
      members: r.members,
      answers: new Map(Object.entries(r.answers ?? {})),
      secure: r.secure ?? true,
    });
  }
  return state;
}

const storedFalse: PeerTimeCondition = {
  status: 'False',
  reason: 'PeerAgeRejected',
  message: 'signal rows with a negative or implausible age from peer b',
};
const storedTrue: PeerTimeCondition = {
  status: 'True',
  reason: 'PeerAgesValid',
  message: 'no polled peer has a rejected signal age',
};

describe('PeerTimeValid', () => {
  const cases: {
    seed: string;
    stored?: PeerTimeCondition;
    rounds: Round[];
    status: 'True' | 'False' | undefined;
    names?: string;
  }[] = [
    {
      seed: 'True means no polled peer has a rejected timestamp',
      rounds: [{ members: ['b', 'c'], answers: { b: clean, c: clean } }],
      status: 'True',
    },
    {
      seed: 'False means at least one does',
      rounds: [{ members: ['b', 'c'], answers: { b: clean, c: skewed } }],
      status: 'False',
      names: 'c',
    },
    {
      seed: 'A peer that does not answer keeps its standing (rejected)',
      rounds: [
        { members: ['b'], answers: { b: skewed } },
        { members: ['b'], answers: { b: silent } },
        { members: ['b'] },
      ],
      status: 'False',
      names: 'b',
    },
    {
      seed: 'A peer that does not answer keeps its standing (valid)',
      rounds: [
        { members: ['b'], answers: { b: clean } },
        { members: ['b'], answers: { b: silent } },
      ],
      status: 'True',
    },
    {
      seed: 'a peer that leaves membership is dropped',
      rounds: [
        { members: ['b', 'c'], answers: { b: skewed, c: clean } },
        { members: ['c'], answers: { c: clean } },
      ],
      status: 'True',
    },
    {
      seed: 'a peer that left and rejoins starts without its old standing',
      rounds: [{ members: ['b'], answers: { b: skewed } }, { members: [] }, { members: ['b'], answers: { b: silent } }],
      status: 'True',
    },
    {
      seed: 'one clean answer restores its validity',
      rounds: [
        { members: ['b'], answers: { b: skewed } },
        { members: ['b'], answers: { b: clean } },
      ],
      status: 'True',
    },
    {
      seed: 'preserves an existing False condition after restarting until every currently polled peer has answered',
      stored: storedFalse,
      rounds: [
        { members: ['b', 'c'], answers: { b: clean } },
        { members: ['b', 'c'], answers: { b: clean, c: silent } },
      ],
      status: 'False',
      names: 'b',
    },
    {
      seed: '... or left membership',
      stored: storedFalse,
      rounds: [{ members: ['b', 'c'], answers: { b: clean } }, { members: ['b'] }],
      status: 'True',
    },
    {
      seed: 'every currently polled peer answered (over several rounds) ends preservation',
      stored: storedFalse,
      rounds: [
        { members: ['b', 'c'], answers: { b: clean } },
        { members: ['b', 'c'], answers: { c: clean } },
      ],
      status: 'True',
    },
    {
      seed: 'Unavailable secure polling is not a clean round and does not establish recovery',
      stored: storedFalse,
      rounds: [
        { members: [], secure: false },
        { members: ['b'], answers: { b: clean }, secure: false },
      ],
      status: 'False',
      names: 'b',
    },
    {
      seed: 'insecure rounds never establish True on their own',
      rounds: [{ members: ['b'], answers: { b: clean }, secure: false }],
      status: undefined,
    },
    {
      seed: 'insecure rounds keep a rejected standing',
      rounds: [
        { members: ['b'], answers: { b: skewed } },
        { members: ['b'], answers: { b: clean }, secure: false },
      ],
      status: 'False',
      names: 'b',
    },
    {
      seed: 'a stored True is not preserved: the rounds decide',
      stored: storedTrue,
      rounds: [{ members: ['b'], answers: { b: skewed } }],
      status: 'False',
      names: 'b',
    },
    {
      seed: 'a lone site (no peers) after a secure round is valid',
      rounds: [{ members: [] }],
      status: 'True',
    },
  ];

  it.each(cases)('$seed', ({ stored, rounds, status, names }) => {
    const condition = peerTimeCondition(run(rounds, stored));
    expect(condition?.status).toBe(status);
    if (names !== undefined) expect(condition?.message).toContain(`peer ${names}`);
  });

  it('a fresh rejection after restart replaces the preserved message with the current peers', () => {
    const condition = peerTimeCondition(run([{ members: ['c'], answers: { c: skewed } }], storedFalse));
    expect(condition).toMatchObject({ status: 'False', reason: 'PeerAgeRejected' });
    expect(condition?.message).toContain('peer c');
  });

  it('the preserved condition is exactly the stored one, so preserving it writes nothing', () => {
    const condition = peerTimeCondition(run([{ members: ['b'] }], storedFalse))!;
    expect(condition).toEqual(storedFalse);
    expect(conditionWriteDue({ ...storedFalse, observedGeneration: 3 }, condition, 3)).toBe(false);
  });

  it('names many rejected peers in a bounded message', () => {
    const members = Array.from({ length: 20 }, (_, i) => `peer-${String(i).padStart(2, '0')}`);
    const answers = Object.fromEntries(members.map((m) => [m, skewed]));
    const message = peerTimeCondition(run([{ members, answers }]))!.message;
    expect(message).toContain('and 12 more');
  });

  it.each([
    ['no stored condition', undefined, storedTrue, 1, true],
    ['same status, message and generation', { ...storedTrue, observedGeneration: 1 }, storedTrue, 1, false],
    ['the reason alone changed', { ...storedTrue, reason: 'Other', observedGeneration: 1 }, storedTrue, 1, false],
    ['the generation changed', { ...storedTrue, observedGeneration: 1 }, storedTrue, 2, true],
    ['the message changed', { ...storedFalse, observedGeneration: 1 }, { ...storedFalse, message: 'other' }, 1, true],
    ['the status changed', { ...storedFalse, observedGeneration: 1 }, storedTrue, 1, true],
  ] as const)(
    'writes only when status, message or generation changes: %s',
    (_name, stored, desired, generation, due) => {
      expect(conditionWriteDue(stored, desired, generation)).toBe(due);
    },
  );
});
