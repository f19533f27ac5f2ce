// Overlay fuzzing at scale: 10 000 mutations of a valid envelope (fields removed or retyped, strings
// emptied or grown, digests flipped or re-sealed over mutated content, scope changed, bytes truncated or padded past
// the size limit) through overlay-sync's validation (its options: 1 MiB, expected scope, no legacy) and the gateway's
// overlay loader (OverlayStore: file read, validation, snapshot build, last-known-good), then a sample through a
// live gateway's file watch. Seeded: the seed is printed and FUZZ_SEED=<seed> replays the run.
import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OverlayStore } from '../../daemons/gateway/overlay-store.ts';
import { createGatewayMetrics } from '../../daemons/gateway/metrics.ts';
import { createLogger } from '../../daemons/shared/log.ts';
import { buildEnvelope } from '../../schemas/overlay/envelope.ts';
import { OVERLAY_REJECT_REASONS } from '../../schemas/overlay/reasons.ts';
import { overlayRevision } from '../../schemas/overlay/revision.ts';
import { OVERLAY_SYNC_MAX_OVERLAY_BYTES, validateOverlay } from '../../schemas/overlay/validate.ts';
import type { OverlayEnvelope } from '../../schemas/overlay/types.ts';
import { call, candidate, chatBody, payload, SCOPE, tempDir, waitFor } from './helpers.ts';
import { GRID_CLUSTER, GRID_TOKEN, startGrid } from './grid-fixture.ts';
import type { Grid } from './grid-fixture.ts';
import { fuzzSeed, gatewayHealth, mib, seededRandom, stallReadingBound, watchLoopLag } from './fuzz.ts';
import type { Random } from './fuzz.ts';

const SEED = fuzzSeed();
const OVERLAYS = 10_000;
const LIVE_OVERLAYS = 200;
/** Planted in values a mutation adds (unknown keys, credential fields): no message or log line may echo it. */
const SECRET = 'overlay-fuzz-secret-value-93be';
const STALL_BOUND_MS = 100;
const RSS_BOUND = 64 * 2 ** 20;
const HEAP_BOUND = 16 * 2 ** 20;

/** A full garbage collection, so heap figures compare live objects only (a leak, not garbage not yet collected). */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

function validEnvelope(): OverlayEnvelope {
  return buildEnvelope({
    payload: payload(
      [
        candidate('m1', 'east', GRID_CLUSTER, {
          selection_group: 0,
          score: 0.9,
          traffic_weight: 3,
          credential: { strategy: 'bearer_token', secretRef: { name: 'cred', namespace: 'grid-system', key: 'token' } },
        }),
        candidate('m1', 'west', 'local', { selection_group: 1, admission_state: 'existing_only' }),
        candidate('m2', 'east', GRID_CLUSTER),
      ],
      'weightedRandom',
    ),
    scope: { gateway: SCOPE.gateway, namespace: SCOPE.namespace },
    provenance: {
      producer_version: 'fuzz',
      source_uid: 'uid-1',
      source_generation: 1,
      rendered_at: '2026-12-01T00:00:00Z',
    },
  });
}

type Path = (string | number)[];

function paths(value: unknown, prefix: Path = [], out: Path[] = []): Path[] {
  if (typeof value === 'object' && value !== null) {
    for (const [key, child] of Object.entries(value)) {
      const path = [...prefix, Array.isArray(value) ? Number(key) : key];
      out.push(path);
      paths(child, path, out);
    }
  }
  return out;
}

function randomValue(random: Random): unknown {
  return random.pick<() => unknown>([
    () => null,
    () => true,
    () => 0,
    () => -1,
    () => 1.5,
    () => 1e308,
    () => 2 ** 53 + 1,
    () => '',
    () => ' ',
    () => 'x'.repeat(random.pick([64, 65, 253, 254, 300, 70_000])),
    () => [],
    () => ({}),
    () => ({ token: SECRET }),
    () => '\u0000\r\n',
    () => '../../etc/passwd',
    () => '\ud800',
    () => 'A'.repeat(64),
    () => 'f'.repeat(63),
    () => '2026-13-45T99:99:99Z',
  ])();
}

function mutateDocument(random: Random, doc: Record<string, unknown>): void {
  for (let n = random.int(3) + 1; n > 0; n--) {
    const all = paths(doc);
    const path = random.pick(all);
    const parent = path.slice(0, -1).reduce<any>((node, key) => node[key], doc);
    const key = path[path.length - 1]!;
    switch (random.int(6)) {
      case 0:
        if (Array.isArray(parent)) parent.splice(Number(key), 1);
        else delete parent[key];
        break;
      case 1:
        if (typeof parent[key] === 'object' && parent[key] !== null && !Array.isArray(parent[key]))
          parent[key][random.pick(['token', 'value', 'extra', '__proto__', 'constructor'])] = random.pick([
            SECRET,
            { value: SECRET },
          ]);
        else parent[key] = randomValue(random);
        break;
      case 2:
        if (Array.isArray(parent[key]))
          for (let i = random.pick([1, 2, 600]); i > 0; i--)
            parent[key].push(structuredClone(parent[key][0] ?? randomValue(random)));
        else parent[key] = randomValue(random);
        break;
      case 3:
        if (typeof parent[key] === 'string' && parent[key].length > 0) {
          const s = parent[key] as string;
          const at = random.int(s.length);
          parent[key] = `${s.slice(0, at)}${random.pick(['0', 'G', 'A', '', ' ', '\u00e9'])}${s.slice(at + 1)}`;
        } else parent[key] = randomValue(random);
        break;
      default:
        parent[key] = randomValue(random);
    }
  }
}

const VALID_TEXT = JSON.stringify(validEnvelope());

/** One generated overlay: a valid envelope mutated as a document or as bytes. */
function generate(random: Random): Buffer {
  const doc = JSON.parse(VALID_TEXT) as Record<string, any>;
  const kind = random.int(10);
  if (kind <= 6) {
    mutateDocument(random, doc);
    // Half the time the digests are re-sealed over the mutated content, so it reaches the checks after them.
    if (
      random.chance(0.5) &&
      typeof doc['overlay'] === 'object' &&
      doc['overlay'] !== null &&
      typeof doc['revision'] === 'object' &&
      doc['revision'] !== null &&
      typeof doc['content_digest'] === 'object' &&
      doc['content_digest'] !== null
    ) {
      try {
        const revision = overlayRevision(doc['overlay']);
        doc['revision'].value = revision;
        doc['content_digest'].value = revision;
      } catch {
        // content the revision cannot be computed over is left with the old digest
      }
    }
  } else if (kind === 7) {
    doc['scope'][random.pick(['network', 'gateway', 'namespace', 'local_site'])] = random.pick([
      'other',
      '',
      SCOPE.gateway.toUpperCase(),
    ]);
  }
  const text = JSON.stringify(doc);
  if (kind < 8) return Buffer.from(text);
  switch (random.int(7)) {
    case 0:
      return Buffer.from(text.slice(0, random.int(text.length)));
    case 1:
      return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]);
    case 2: {
      const bytes = Buffer.from(text);
      for (let k = random.int(3) + 1; k > 0; k--) bytes[random.int(bytes.length)] = random.int(256);
      return bytes;
    }
    case 3:
      // Sizes around both limits (overlay-sync 1 MiB, gateway 2 MiB); rarer, as each costs a megabyte or two.
      if (random.chance(0.2))
        return Buffer.from(text.padEnd(OVERLAY_SYNC_MAX_OVERLAY_BYTES + random.pick([-10, 1, 1024 * 1024 + 1]), ' '));
      return Buffer.from(text.replace('{', `{"padding":"${'p'.repeat(random.int(64 * 1024))}",`));
    case 4:
      return Buffer.from(`${'['.repeat(100_000)}${']'.repeat(100_000)}`);
    case 5:
      return Buffer.from(`${text}${random.pick(['x', '{}', '\u0000', '  '])}`);
    default:
      return random.bytes(random.int(4096));
  }
}

describe('overlay fuzz', () => {
  let loggedSecret = false;
  let dir: string;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir('overlay-fuzz'));
  });

  afterAll(async () => {
    await cleanup();
  });

  it(`${OVERLAYS} mutated overlays: overlay-sync's validation and the gateway loader agree, never throw, never block over 100 ms`, async () => {
    console.log(`overlay fuzz seed ${SEED} (FUZZ_SEED=${SEED} reproduces)`);
    const started = performance.now();
    const file = join(dir, 'routing-overlay.json');
    const valid = Buffer.from(JSON.stringify(validEnvelope()));
    await writeFile(file, valid);
    const logger = createLogger({
      name: 'gateway',
      level: 'debug',
      destination: { write: (line: string) => void (loggedSecret ||= line.includes(SECRET)) },
    });
    const store = new OverlayStore({
      file,
      expectedScope: SCOPE,
      reloadEnabled: false,
      debounceMs: 0,
      pollIntervalMs: 0,
      logger,
      metrics: createGatewayMetrics('consumer', { process: false, eventLoop: false }),
    });
    await store.start();
    expect(store.current()).not.toBeNull();
    const syncOptions = { maxBytes: OVERLAY_SYNC_MAX_OVERLAY_BYTES, expectedScope: SCOPE, allowLegacy: false };
    const reasons = new Set<string>(OVERLAY_REJECT_REASONS);
    collectGarbage();
    const heapBefore = process.memoryUsage().heapUsed;
    const verdicts = new Map<string, number>();
    const failures: string[] = [];
    let slowest = 0;
    let slowestCase = '';
    let slowestLoad = 0;
    let lastAccepted = store.current()!.revision;
    let previous: Buffer = valid;
    for (let index = 0; index < OVERLAYS; index++) {
      const random = seededRandom((SEED + Math.imul(index + 1, 0x9e3779b1)) >>> 0);
      const raw = generate(random);
      const where = `overlay ${index} (FUZZ_SEED=${SEED})`;
      const t0 = performance.now();
      const sync = validateOverlay(raw, syncOptions);
      const t1 = performance.now();
      await writeFile(file, raw);
      const t2 = performance.now();
      const loaded = await store.reload('fuzz');
      const t3 = performance.now();
      // Validation is the synchronous part of a load: what a gateway's event loop is blocked for. (The load's wall
      // time also counts the file read on the thread pool; this process's loop delay counts the generator's work.)
      if (t1 - t0 > slowest) {
        slowest = t1 - t0;
        slowestCase = `${index}, ${raw.length} bytes`;
      }
      slowestLoad = Math.max(slowestLoad, t3 - t2);
      const verdict = sync.ok ? 'accepted' : sync.reason;
      verdicts.set(verdict, (verdicts.get(verdict) ?? 0) + 1);
      if (!sync.ok) {
        if (!reasons.has(sync.reason)) failures.push(`${where}: unknown reason ${sync.reason}`);
        if (sync.message.length > 300 || sync.message.includes(SECRET))
          failures.push(`${where}: message ${sync.message.slice(0, 120)}`);
      }
      // The two limits differ (overlay-sync 1 MiB, gateway 2 MiB); otherwise both say the same.
      const sizeOnly = !sync.ok && sync.reason === 'oversized' && raw.length <= 2 * OVERLAY_SYNC_MAX_OVERLAY_BYTES;
      const sameBytes = raw.equals(previous);
      previous = raw;
      if (sameBytes) {
        // The loader skips bytes it has already judged (valid or not) and keeps what it serves.
        if (loaded.outcome !== 'unchanged') failures.push(`${where}: same bytes, gateway ${loaded.outcome}`);
      } else if (loaded.outcome === 'rejected') {
        if (sync.ok || (loaded.reason !== sync.reason && !sizeOnly))
          failures.push(`${where}: gateway ${loaded.reason}, overlay-sync ${verdict}`);
      } else {
        if (!sync.ok && !sizeOnly) failures.push(`${where}: gateway ${loaded.outcome}, overlay-sync ${verdict}`);
        if (loaded.outcome === 'accepted') lastAccepted = loaded.revision;
      }
      // Last-known-good: whatever was loaded, the store serves the last accepted snapshot.
      if (store.current()?.revision !== lastAccepted)
        failures.push(`${where}: serving ${store.current()?.revision}, last accepted ${lastAccepted}`);
    }
    store.close();
    collectGarbage();
    const grown = process.memoryUsage().heapUsed - heapBefore;
    const summary = [...verdicts.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k}:${v}`)
      .join(' ');
    console.log(
      `overlay fuzz: seed ${SEED}, ${OVERLAYS} overlays in ${((performance.now() - started) / 1000).toFixed(1)} s; slowest validation ${slowest.toFixed(1)} ms (overlay ${slowestCase}), ` +
        `slowest load (with file read) ${slowestLoad.toFixed(0)} ms, live heap ${grown >= 0 ? '+' : ''}${mib(grown)} MiB; verdicts ${summary}; failures ${failures.length}`,
    );
    expect(failures.slice(0, 20)).toEqual([]);
    expect(verdicts.get('accepted') ?? 0).toBeGreaterThan(100);
    expect(slowest).toBeLessThan(STALL_BOUND_MS);
    expect(grown).toBeLessThan(HEAP_BOUND);
    expect(loggedSecret).toBe(false);
  }, 120_000);
});

describe('overlay fuzz against a live gateway', () => {
  let grid: Grid;

  beforeAll(async () => {
    grid = await startGrid();
  }, 60_000);

  afterAll(async () => {
    await grid?.close();
  });

  it(`${LIVE_OVERLAYS} mutated overlays through the file watch: alive, serving, within bounds`, async () => {
    const overlayPath = join(grid.dir, 'routing-overlay.json');
    const before = await gatewayHealth(grid.consumerAdmin);
    const lag = watchLoopLag(grid.consumerAdmin);
    const loads = async (): Promise<number> =>
      (await call(`${grid.consumerAdmin}/metrics`)).text
        .split('\n')
        .filter((l) => l.startsWith('grid_gateway_overlay_reloads_total{'))
        .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
    const loadsBefore = await loads();
    for (let index = 0; index < LIVE_OVERLAYS; index++) {
      const random = seededRandom((SEED + 7 + Math.imul(index + 1, 0x9e3779b1)) >>> 0);
      const count = await loads();
      // Atomic replace, as overlay-sync writes (the bytes as generated, not re-encoded).
      await writeFile(`${overlayPath}.tmp`, generate(random));
      await rename(`${overlayPath}.tmp`, overlayPath);
      // Each file is loaded before the next is written (the watch debounces bursts into one load).
      await waitFor(`load of live overlay ${index}`, async () => (await loads()) > count || undefined, 2_000);
    }
    // Back to a good overlay: the gateway must pick it up and serve.
    await writeFile(`${overlayPath}.tmp`, JSON.stringify(validEnvelope()));
    await rename(`${overlayPath}.tmp`, overlayPath);
    await new Promise((r) => setTimeout(r, 300));
    const worstLag = await lag.stop();
    expect(grid.consumer.proc.exitCode).toBeNull();
    expect(
      (await call(`http://127.0.0.1:${grid.consumerPort}/v1/chat/completions`, { body: chatBody('m1') })).status,
    ).toBe(200);
    const after = await gatewayHealth(grid.consumerAdmin);
    const reloads = (await loads()) - loadsBefore;
    console.log(
      `overlay fuzz (live gateway): seed ${SEED}, ${LIVE_OVERLAYS} overlays written, ${reloads} loads; rss ${mib(before.rssBytes)}→${mib(after.rssBytes)} MiB, ` +
        `fds ${before.openFds}→${after.openFds}, max loop lag ${worstLag.toFixed(0)} ms`,
    );
    expect(reloads).toBeGreaterThan(LIVE_OVERLAYS);
    expect(after.rssBytes - before.rssBytes).toBeLessThan(RSS_BOUND);
    expect(after.openFds - before.openFds).toBeLessThan(16);
    expect(worstLag).toBeLessThan(stallReadingBound(STALL_BOUND_MS));
    const logs = grid.consumer.stdout() + grid.consumer.stderr();
    expect(logs).not.toContain(GRID_TOKEN);
    expect(logs).not.toContain(SECRET);
  }, 60_000);
});
