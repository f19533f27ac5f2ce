// The resource store's pure rules: reconnect backoff, watch-stream translation (including 410 Gone),
// the relist diff that turns a fresh list into missed events, merge patch and local apply semantics,
// and API paths. No I/O, no server.

import { describe, expect, it } from 'vitest';
import { Backoff, backoffDelayMs, WATCH_BACKOFF } from '../../daemons/shared/resource-store/backoff.ts';
import { checkRef } from '../../daemons/shared/resource-store/errors.ts';
import { codeForStatus, resourcePath } from '../../daemons/shared/resource-store/kube-http.ts';
import { applyObject, mergePatch, patchObjectStatus } from '../../daemons/shared/resource-store/merge.ts';
import { checkLabelSelector, matchesFilter, ObjectCache } from '../../daemons/shared/resource-store/object-cache.ts';
import { CONFIG_MAP } from '../../daemons/shared/resource-store/index.ts';
import type { KubeObject, ResourceKind } from '../../daemons/shared/resource-store/types.ts';
import { LineSplitter, translateWatchLine } from '../../daemons/shared/resource-store/watch-lines.ts';

const GRID_NETWORK: ResourceKind = {
  apiVersion: 'grid.praxis.fast/v1alpha1',
  kind: 'GridNetwork',
  plural: 'gridnetworks',
  namespaced: false,
};

function cm(name: string, rv: string, data: Record<string, string> = {}): KubeObject {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: 'ns', resourceVersion: rv }, data };
}

describe('backoff', () => {
  it('doubles from 1 s and never exceeds 30 s', () => {
    const ceilings = Array.from({ length: 8 }, (_, i) => backoffDelayMs(WATCH_BACKOFF, i, () => 0));
    expect(ceilings).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
    expect(backoffDelayMs(WATCH_BACKOFF, 1000, () => 0)).toBe(30000);
  });

  it('jitter only shortens, by at most 20 %', () => {
    expect(backoffDelayMs(WATCH_BACKOFF, 0, () => 1)).toBe(800);
    expect(backoffDelayMs(WATCH_BACKOFF, 6, () => 1)).toBe(24000);
    for (const r of [0, 0.25, 0.5, 0.999]) {
      const d = backoffDelayMs(WATCH_BACKOFF, 3, () => r);
      expect(d).toBeGreaterThanOrEqual(6400);
      expect(d).toBeLessThanOrEqual(8000);
    }
    // A broken random source cannot push the delay outside the range.
    expect(backoffDelayMs(WATCH_BACKOFF, 0, () => 7)).toBe(800);
    expect(backoffDelayMs(WATCH_BACKOFF, 0, () => -3)).toBe(1000);
  });

  it('restarts from the initial delay after reset', () => {
    const backoff = new Backoff(WATCH_BACKOFF, () => 0);
    expect([backoff.next(), backoff.next(), backoff.next()]).toEqual([1000, 2000, 4000]);
    backoff.reset();
    expect(backoff.next()).toBe(1000);
  });
});

describe('watch stream translation', () => {
  it('passes ADDED/MODIFIED/DELETED through with their resourceVersion', () => {
    const line = JSON.stringify({ type: 'MODIFIED', object: cm('a', '42') });
    const action = translateWatchLine(line);
    expect(action).toMatchObject({ action: 'event', resourceVersion: '42', event: { type: 'MODIFIED' } });
  });

  it('treats 410 and reason Expired as "relist", other errors as "reconnect"', () => {
    const gone = {
      type: 'ERROR',
      object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version: 1 (5)' },
    };
    expect(translateWatchLine(JSON.stringify(gone))).toMatchObject({ action: 'gone' });
    const expired = { type: 'ERROR', object: { kind: 'Status', reason: 'Expired', message: 'expired' } };
    expect(translateWatchLine(JSON.stringify(expired))).toMatchObject({ action: 'gone' });
    const other = { type: 'ERROR', object: { kind: 'Status', code: 500, message: 'etcd unavailable' } };
    expect(translateWatchLine(JSON.stringify(other))).toEqual({
      action: 'error',
      code: 500,
      message: 'etcd unavailable',
    });
  });

  it('moves the resourceVersion on bookmarks and ignores junk without throwing', () => {
    const bookmark = { type: 'BOOKMARK', object: { kind: 'ConfigMap', metadata: { resourceVersion: '99' } } };
    expect(translateWatchLine(JSON.stringify(bookmark))).toEqual({ action: 'bookmark', resourceVersion: '99' });
    for (const junk of [
      '',
      'not json',
      '[]',
      '{"type":"ADDED"}',
      '{"type":"ADDED","object":{"metadata":{}}}',
      '{"type":"WAT","object":{}}',
    ]) {
      expect(translateWatchLine(junk).action, junk).toBe('ignore');
    }
    const huge = `{"type":"ERROR","object":{"code":500,"message":"${'x'.repeat(10_000)}"}}`;
    const action = translateWatchLine(huge);
    expect(action.action === 'error' && action.message.length).toBeLessThanOrEqual(201);
  });

  it('splits lines across chunk boundaries', () => {
    const splitter = new LineSplitter();
    expect(splitter.push('{"a":')).toEqual([]);
    expect(splitter.push('1}\n{"b"')).toEqual(['{"a":1}']);
    expect(splitter.push(':2}\n\n')).toEqual(['{"b":2}', '']);
    expect(splitter.push('{"c":3}')).toEqual([]);
    expect(splitter.flush()).toEqual(['{"c":3}']);
  });
});

describe('relist diff (ObjectCache)', () => {
  it('reports exactly the missed changes after a relist', () => {
    const cache = new ObjectCache();
    expect(cache.replace([cm('a', '1'), cm('b', '2')]).map((e) => `${e.type} ${e.object.metadata.name}`)).toEqual([
      'ADDED a',
      'ADDED b',
    ]);
    const events = cache.replace([cm('a', '1'), cm('b', '5'), cm('c', '6')]);
    expect(events.map((e) => `${e.type} ${e.object.metadata.name}`)).toEqual(['MODIFIED b', 'ADDED c']);
    expect(cache.replace([cm('c', '6')]).map((e) => `${e.type} ${e.object.metadata.name}`)).toEqual([
      'DELETED a',
      'DELETED b',
    ]);
  });

  it('drops a streamed duplicate of what a relist already delivered', () => {
    const cache = new ObjectCache();
    cache.replace([cm('a', '3')]);
    expect(cache.apply({ type: 'MODIFIED', object: cm('a', '3') })).toBe(false);
    expect(cache.apply({ type: 'MODIFIED', object: cm('a', '4') })).toBe(true);
    expect(cache.apply({ type: 'DELETED', object: cm('x', '9') })).toBe(false);
  });

  it('filters by namespace, name and label selector', () => {
    const object = { ...cm('a', '1'), metadata: { name: 'a', namespace: 'ns', labels: { app: 'x', tier: 'edge' } } };
    expect(matchesFilter(object, { namespace: 'ns', name: 'a', labelSelector: 'app=x,tier=edge' })).toBe(true);
    expect(matchesFilter(object, { name: 'b' })).toBe(false);
    expect(matchesFilter(object, { namespace: 'other' })).toBe(false);
    expect(matchesFilter(object, { labelSelector: 'app=y' })).toBe(false);
    expect(matchesFilter(object, { labelSelector: 'tier' })).toBe(true);
    expect(checkLabelSelector('app=x, tier')).toBeUndefined();
    expect(checkLabelSelector('app in (x)')).toMatch(/not "key" or "key=value"/);
  });
});

describe('local apply and status patch semantics', () => {
  it('merge patch follows RFC 7386', () => {
    expect(mergePatch({ a: 1, b: { c: 2, d: 3 } }, { b: { c: null, e: 4 }, f: [1] })).toEqual({
      a: 1,
      b: { d: 3, e: 4 },
      f: [1],
    });
    expect(mergePatch({ a: 1 }, 'x')).toBe('x');
  });

  it('a repeated identical apply changes nothing (no new resourceVersion)', () => {
    const first = applyObject(undefined, cm('a', '', { k: 'v' }), 'grid-operator')!;
    expect(first.metadata.generation).toBe(1);
    expect(applyObject(first, cm('a', '', { k: 'v' }), 'grid-operator')).toBeUndefined();
  });

  it('keeps status and merges labels on apply; bumps generation only for spec changes', () => {
    const base = applyObject(
      undefined,
      { ...cm('a', ''), metadata: { name: 'a', namespace: 'ns', labels: { x: '1' } } },
      'op',
    )!;
    const withStatus = patchObjectStatus(base, { phase: 'Active' }, 'op')!;
    expect(withStatus.metadata.generation).toBe(1);
    const relabelled = applyObject(
      withStatus,
      { ...cm('a', ''), metadata: { name: 'a', namespace: 'ns', labels: { y: '2' } } },
      'op',
    )!;
    expect(relabelled.metadata.labels).toEqual({ x: '1', y: '2' });
    expect(relabelled['status']).toEqual({ phase: 'Active' });
    expect(relabelled.metadata.generation).toBe(1);
    const respecced = applyObject(relabelled, cm('a', '', { k: 'changed' }), 'op')!;
    expect(respecced.metadata.generation).toBe(2);
    expect(patchObjectStatus(respecced, { phase: 'Active' }, 'op')).toBeUndefined();
  });
});

describe('API paths and names', () => {
  it('builds core, group, namespaced, cluster-scoped and subresource paths', () => {
    expect(resourcePath(CONFIG_MAP, 'grid-system', 'grid-overlay-a-b')).toBe(
      '/api/v1/namespaces/grid-system/configmaps/grid-overlay-a-b',
    );
    expect(resourcePath(CONFIG_MAP, undefined)).toBe('/api/v1/configmaps');
    expect(resourcePath(GRID_NETWORK, undefined, 'net', 'status')).toBe(
      '/apis/grid.praxis.fast/v1alpha1/gridnetworks/net/status',
    );
    expect(resourcePath(GRID_NETWORK, 'ignored', 'net')).toBe('/apis/grid.praxis.fast/v1alpha1/gridnetworks/net');
  });

  it('maps HTTP statuses to stable codes', () => {
    expect([404, 409, 410, 403, 422, 500, 503].map(codeForStatus)).toEqual([
      'not_found',
      'conflict',
      'gone',
      'forbidden',
      'invalid',
      'unavailable',
      'unavailable',
    ]);
  });

  it('rejects names that are not DNS subdomains (no path tricks in the local store)', () => {
    for (const name of ['../etc', 'a/b', 'UPPER', '', 'a..b', '-a']) {
      expect(() => checkRef(CONFIG_MAP, { name, namespace: 'ns' }), name).toThrow(/not a DNS-1123 subdomain/);
    }
    expect(() => checkRef(CONFIG_MAP, { name: 'ok' })).toThrow(/namespace "" is missing/);
    expect(() => checkRef(GRID_NETWORK, { name: 'net' })).not.toThrow();
  });
});
