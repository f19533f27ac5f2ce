/**
 * `agn up --demo`: drives traffic through a running local grid and narrates the principal flows: attribution under
 * the selection mode (weightedRandom as compiled, then roundRobin after editing the manifest), a provider's queue
 * rising past the admission threshold, a provider process killed and restored, and a whole remote site lost.
 * Every wait is bounded and says what it waits for.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments, stringify as stringifyYaml } from 'yaml';
import { readOverlays, type OverlayCandidate } from '../local-grid/grid-status.ts';
import type { LocalGrid } from '../local-grid/runner.ts';
import { attribution, chatCompletion, waitFor } from '../local-grid/traffic.ts';

const MODEL = 'sim-model-v1';

function describeCounts(counts: Map<string, number>): string {
  return [...counts]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
}

async function candidates(grid: LocalGrid, site: string): Promise<readonly OverlayCandidate[]> {
  return (await readOverlays(grid)).find((o) => o.site === site)?.candidates ?? [];
}

function row(c: OverlayCandidate): string {
  return `${c.site}/${c.cluster} group ${c.selection_group} ${c.admission_state}${c.fresh ? '' : ' stale'} score ${c.score}`;
}

/** Edits one GridNetwork in a site's manifest file, as a GitOps change would; the operator re-imports it. */
function editNetwork(grid: LocalGrid, site: string, edit: (spec: Record<string, unknown>) => void): void {
  const file = join(grid.site(site).manifestsDir, `${site}.yaml`);
  const docs = parseAllDocuments(readFileSync(file, 'utf8')).map(
    (d) => d.toJS() as { kind?: string; spec?: Record<string, unknown> },
  );
  for (const doc of docs) if (doc.kind === 'GridNetwork' && doc.spec !== undefined) edit(doc.spec);
  writeFileSync(file, docs.map((d) => stringifyYaml(d)).join('---\n'));
}

/** Waits until the consumer serves the overlay revision the operator last rendered, so traffic shows the change. */
async function consumerCaughtUp(grid: LocalGrid, adminAddress: string): Promise<void> {
  await waitFor(
    'the consumer gateway to accept the latest overlay',
    async () => {
      const east = (await readOverlays(grid)).find((o) => o.site === 'east');
      const status = (await fetch(`http://${adminAddress}/status`).then((r) => r.json())) as {
        accepted_revision?: string;
      };
      return east !== undefined && status.accepted_revision === east.revision ? true : undefined;
    },
    30_000,
  );
}

export async function runDemo(grid: LocalGrid, say: (message: string) => void): Promise<void> {
  const consumer = grid.byRole('consumer-gateway', 'east')[0];
  if (consumer?.listenAddress === undefined) throw new Error('the demo needs a consumer gateway at site east');
  const listen = consumer.listenAddress;
  const key = grid.demoKey();
  const admin = consumer.adminAddress ?? '';
  const local = async () => (await candidates(grid, 'east')).filter((c) => c.name === MODEL);

  say(`demo 1/5: attribution. east's overlay for ${MODEL}: ${(await local()).map(row).join('; ')}`);
  say(
    `  weightedRandom as compiled (capacityWeight 3 : 1): 24 requests -> ${describeCounts(await attribution(listen, MODEL, 24, key))}`,
  );
  editNetwork(grid, 'east', (spec) => {
    spec['selectionPolicy'] = { mode: 'roundRobin' };
    delete spec['placementPolicy'];
  });
  say(
    "  editing east's GridNetwork manifest: selectionPolicy.mode roundRobin (placementPolicy only goes with weightedRandom)",
  );
  await waitFor(
    'the roundRobin overlay at the consumer',
    async () => {
      const overlays = await readOverlays(grid);
      const east = overlays.find((o) => o.site === 'east');
      const status = await fetch(`http://${consumer.adminAddress}/status`).then(
        (r) => r.json() as Promise<{ accepted_revision?: string }>,
      );
      return east !== undefined &&
        !east.candidates.some((c) => 'traffic_weight' in c) &&
        status.accepted_revision === east.revision
        ? true
        : undefined;
    },
    30_000,
  );
  const sequence: string[] = [];
  for (let i = 0; i < 6; i++) sequence.push((await chatCompletion(listen, MODEL, 10_000, key)).provider ?? 'error');
  say(`  roundRobin: 6 requests in order -> ${sequence.join(', ')}`);

  say(
    'demo 2/5: admission. east-llm-a reports queue depth 0.95 (enter threshold 0.85; stabilized: 2 samples and 10 s in state)',
  );
  await grid.setSimState('east-llm-a', { queue_depth: 0.95 });
  const t0 = Date.now();
  await waitFor(
    'east-llm-a to close to new requests',
    async () => {
      const a = (await local()).find((c) => c.cluster === 'east-llm-a');
      if (a !== undefined && Math.round((Date.now() - t0) / 1000) % 5 === 0)
        say(`  ... east-llm-a ${a.admission_state}, score ${a.score}`);
      return a?.admission_state === 'existing_only' ? true : undefined;
    },
    60_000,
    1000,
  );
  await consumerCaughtUp(grid, admin);
  say(
    `  east-llm-a is existing_only after ${((Date.now() - t0) / 1000).toFixed(1)} s: ${(await local()).map(row).join('; ')}`,
  );
  say(`  12 requests -> ${describeCounts(await attribution(listen, MODEL, 12, key))} (traffic moved away)`);
  await grid.setSimState('east-llm-a', { queue_depth: 0 });
  say('  queue back to 0; recovery waits for 3 good samples and the 30 s hold-down');

  say('demo 3/5: a provider process dies. Killing east/sim-east-llm-b (SIGKILL)');
  await grid.killProcess('east/sim-east-llm-b/sim');
  const t1 = Date.now();
  await waitFor(
    'east-llm-b withdrawn',
    async () => {
      const b = (await local()).find((c) => c.cluster === 'east-llm-b');
      return b === undefined || b.admission_state !== 'new_and_existing' || !b.fresh ? true : undefined;
    },
    60_000,
  );
  await consumerCaughtUp(grid, admin);
  say(`  withdrawn after ${((Date.now() - t1) / 1000).toFixed(1)} s: ${(await local()).map(row).join('; ')}`);
  say(
    `  12 requests -> ${describeCounts(await attribution(listen, MODEL, 12, key))} (east-llm-a is still closed to new requests from step 2, so new traffic crosses to the next group)`,
  );

  say('demo 4/5: recovery. Restarting east/sim-east-llm-b');
  await grid.startProcess('east/sim-east-llm-b/sim');
  const t2 = Date.now();
  await waitFor(
    'both east providers open to new requests',
    async () => {
      const rows = (await local()).filter((c) => c.site === 'east');
      return rows.length === 2 && rows.every((c) => c.admission_state === 'new_and_existing' && c.fresh)
        ? true
        : undefined;
    },
    120_000,
    1000,
  );
  await consumerCaughtUp(grid, admin);
  say(
    `  both back after ${((Date.now() - t2) / 1000).toFixed(1)} s; 12 requests -> ${describeCounts(await attribution(listen, MODEL, 12, key))}`,
  );

  say(
    "demo 5/5: a remote site is lost. First west's operator dies (SIGKILL: no graceful SWIM leave; its gateways still answer)",
  );
  await grid.killProcess('west/gossip-operator/gossip-operator');
  const t3 = Date.now();
  await waitFor(
    "west's candidates stale in east's overlay",
    async () => {
      const west = (await candidates(grid, 'east')).filter((c) => c.site === 'west');
      return west.length > 0 && west.every((c) => !c.fresh) ? west : undefined;
    },
    60_000,
  );
  await consumerCaughtUp(grid, admin);
  say(
    `  member dead after ${((Date.now() - t3) / 1000).toFixed(1)} s; stale candidates are kept (fresh=false): ${(
      await candidates(grid, 'east')
    )
      .filter((c) => c.site === 'west')
      .map(row)
      .join('; ')}`,
  );
  say(`  12 requests for ${MODEL} -> ${describeCounts(await attribution(listen, MODEL, 12, key))}`);
  say(
    '  then the rest of west (gateways, backends) is killed: the GridSite probe fails, west turns Unreachable and is no longer eligible',
  );
  await Promise.all(grid.processes.filter((p) => p.site === 'west').map((p) => grid.killProcess(p.name)));
  await waitFor(
    "west's candidates withdrawn",
    async () => ((await candidates(grid, 'east')).some((c) => c.site === 'west') ? undefined : true),
    60_000,
  );
  await consumerCaughtUp(grid, admin);
  say(
    `  west candidates in east's overlay: ${
      (await candidates(grid, 'east'))
        .filter((c) => c.site === 'west')
        .map(row)
        .join('; ') || 'none'
    }`,
  );
  say(
    `  12 requests for ${MODEL} -> ${describeCounts(await attribution(listen, MODEL, 12, key))} (traffic stays local)`,
  );
  const remote = await chatCompletion(listen, 'gpt-4o-mini', 10_000, key);
  say(`  gpt-4o-mini (only west serves it) -> HTTP ${remote.status} ${remote.body.slice(0, 160)}`);
  say('demo done; the grid keeps running without site west');
}
