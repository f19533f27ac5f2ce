// The pure core of overlay-sync: what an observation means and how it moves cold / ready / ready_degraded.

import { describe, expect, it } from 'vitest';
import {
  assess,
  COLD,
  restored,
  transition,
  type Assessment,
  type SyncStatus,
} from '../../daemons/overlay-sync/state.ts';
import { contractValidator, type ContractVerdict } from '../../daemons/overlay-sync/contracts.ts';

const REV_A = 'a'.repeat(64);
const REV_B = 'b'.repeat(64);
const AT = '2026-11-29T12:00:00.000Z';

const envelope = (revision: string) => (): ContractVerdict => ({ ok: true, revision });
const raw = { kind: 'payload' as const, raw: new Uint8Array([123, 125]) };

describe('assess', () => {
  it('accepts a new revision, reports the written one as unchanged', () => {
    expect(assess(raw, undefined, envelope(REV_A))).toEqual({
      outcome: 'accepted',
      reason: 'new_revision',
      revision: REV_A,
    });
    expect(assess(raw, REV_B, envelope(REV_A))).toMatchObject({ outcome: 'accepted', revision: REV_A });
    expect(assess(raw, REV_A, envelope(REV_A))).toEqual({
      outcome: 'unchanged',
      reason: 'same_revision',
      revision: REV_A,
    });
  });

  it('passes the validator reason through and never accepts a bare payload', () => {
    expect(assess(raw, REV_A, () => ({ ok: false, reason: 'digest_mismatch', message: 'm' }))).toEqual({
      outcome: 'rejected',
      reason: 'digest_mismatch',
      message: 'm',
    });
    const bare = new TextEncoder().encode(JSON.stringify({ network: 'grid', local_site: 'west', candidates: [] }));
    const overlay = contractValidator('overlay', { maxBytes: 1024, expectedScope: {} });
    expect(assess({ kind: 'payload', raw: bare }, undefined, overlay)).toMatchObject({
      outcome: 'rejected',
      reason: 'malformed',
    });
    // The serving contract refuses the overlay's bare payload too: it is not a serving config.
    expect(
      assess(
        { kind: 'payload', raw: bare },
        undefined,
        contractValidator('serving', { maxBytes: 1024, expectedScope: {} }),
      ),
    ).toMatchObject({ outcome: 'rejected', reason: 'malformed' });
    expect(assess({ kind: 'missing', reason: 'configmap_deleted', message: 'gone' }, REV_A, envelope(REV_A))).toEqual({
      outcome: 'missing',
      reason: 'configmap_deleted',
      message: 'gone',
    });
  });
});

describe('transition', () => {
  const accepted: Assessment = { outcome: 'accepted', reason: 'new_revision', revision: REV_A };
  const rejected: Assessment = { outcome: 'rejected', reason: 'scope_mismatch', message: 'scope.network differs' };
  const unchanged: Assessment = { outcome: 'unchanged', reason: 'same_revision', revision: REV_A };
  const ready: SyncStatus = transition(COLD, {
    assessment: accepted,
    resourceVersion: '5',
    at: AT,
    write: { ok: true, bytes: 10 },
  });

  it.each<[string, SyncStatus, Parameters<typeof transition>[1], Partial<SyncStatus>]>([
    [
      'cold + rejected stays cold',
      COLD,
      { assessment: rejected, resourceVersion: '1', at: AT },
      { state: 'cold', degradedReason: 'scope_mismatch', writtenRevision: undefined },
    ],
    [
      'cold + accepted and written turns ready',
      COLD,
      { assessment: accepted, resourceVersion: '1', at: AT, write: { ok: true, bytes: 10 } },
      {
        state: 'ready',
        writtenRevision: REV_A,
        writtenBytes: 10,
        writtenSource: 'configmap',
        degradedReason: undefined,
      },
    ],
    [
      'cold + failed write stays cold',
      COLD,
      { assessment: accepted, resourceVersion: '1', at: AT, write: { ok: false, message: 'EROFS' } },
      { state: 'cold', degradedReason: 'write_failed', degradedMessage: 'EROFS', writtenRevision: undefined },
    ],
    [
      'ready + rejected keeps the file, degraded',
      ready,
      { assessment: rejected, resourceVersion: '6', at: AT },
      {
        state: 'ready_degraded',
        writtenRevision: REV_A,
        degradedReason: 'scope_mismatch',
        observedResourceVersion: '6',
      },
    ],
    [
      'ready + failed write keeps the old revision, degraded',
      ready,
      {
        assessment: { outcome: 'accepted', reason: 'new_revision', revision: REV_B },
        resourceVersion: '7',
        at: AT,
        write: { ok: false, message: 'ENOSPC' },
      },
      { state: 'ready_degraded', writtenRevision: REV_A, observedRevision: REV_B, degradedReason: 'write_failed' },
    ],
    [
      'ready + configmap deleted keeps the file, degraded',
      ready,
      {
        assessment: { outcome: 'missing', reason: 'configmap_deleted', message: 'deleted' },
        resourceVersion: '8',
        at: AT,
      },
      { state: 'ready_degraded', writtenRevision: REV_A, degradedReason: 'configmap_deleted' },
    ],
  ])('%s', (_name, from, result, expected) => {
    expect(transition(from, result)).toMatchObject(expected);
  });

  it('an unchanged observation clears a degraded state without a write', () => {
    const degraded = transition(ready, { assessment: rejected, resourceVersion: '6', at: AT });
    const recovered = transition(degraded, { assessment: unchanged, resourceVersion: '9', at: AT });
    expect(recovered).toMatchObject({
      state: 'ready',
      degradedReason: undefined,
      writtenAt: ready.writtenAt,
      writtenSource: 'configmap',
    });
  });

  it('a restored file is ready before any observation', () => {
    expect(restored(COLD, REV_A, 42, AT)).toMatchObject({
      state: 'ready',
      writtenRevision: REV_A,
      writtenBytes: 42,
      writtenSource: 'restored',
      lastOutcome: undefined,
    });
  });
});
