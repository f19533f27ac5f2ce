/**
 * Tenants end to end on the compiled example grid run locally: two tenants (the demo keys `agn up` mints) send
 * traffic, streamed and not, through east's two consumer gateway replicas; every site's GridNetwork budgetStatus
 * converges to the spend this test prices from the usage in the responses; a tenant over its cap gets 429
 * insufficient_quota while the other still gets 200; a missing or unknown key gets 401; no key or hash is in any log.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, stringify as stringifyYaml } from 'yaml';
import { mintCallerKey } from '../../schemas/gateway/caller-keys.ts';
import { GRID_NETWORK } from '../../daemons/local-grid/grid-status.ts';
import { type LocalGrid, REPO_ROOT, startLocalGrid } from '../../daemons/local-grid/runner.ts';
import { waitFor } from '../../daemons/local-grid/traffic.ts';

const MODEL = 'sim-model-v1';
// Every provider serving sim-model-v1 in the example is priced the same (constructs/example-grid.ts), so the price
// of a request does not depend on which one the grid routed it to.
const PRICE = { perMillionInputTokens: 0.5, perMillionOutputTokens: 1.5 };
const runDir = mkdtempSync(join(tmpdir(), 'agn-tenants-'));
let grid: LocalGrid;

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
}

const consumers = () => grid.byRole('consumer-gateway', 'east').map((c) => c.listenAddress!);

/** One chat completion; returns the status, the error code of a refusal and the usage of an answer. */
async function send(
  listen: string,
  headers: Record<string, string>,
  stream: boolean,
): Promise<{ status: number; code?: string; usage?: Usage }> {
  const response = await fetch(`http://${listen}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: 'user', content: 'spend a little' }],
      ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    }),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  if (response.status !== 200)
    return { status: response.status, code: (JSON.parse(text) as { error?: { code?: string } }).error?.code };
  if (!stream) return { status: 200, usage: (JSON.parse(text) as { usage: Usage }).usage };
  const events = text
    .split('\n\n')
    .map((e) => e.trim())
    .filter((e) => e.startsWith('data: ') && e !== 'data: [DONE]');
  const withUsage = events
    .map((e) => JSON.parse(e.slice(6)) as { usage?: Usage | null })
    .filter((e) => e.usage != null);
  expect(withUsage, 'one final usage chunk in the stream').toHaveLength(1);
  return { status: 200, usage: withUsage[0]!.usage! };
}

const spent: Record<string, number> = {};
function price(tenant: string, usage: Usage): void {
  spent[tenant] =
    (spent[tenant] ?? 0) +
    (usage.prompt_tokens * PRICE.perMillionInputTokens + usage.completion_tokens * PRICE.perMillionOutputTokens) / 1e6;
}
async function spend(listen: string, tenant: string, stream: boolean): Promise<void> {
  const result = await send(listen, { authorization: `Bearer ${grid.demoKey(tenant)!}` }, stream);
  expect(result.status, `${tenant} via ${listen}`).toBe(200);
  price(tenant, result.usage!);
}

async function budgetStatus(
  site: string,
): Promise<Record<string, { spendUsd: number; capUsd?: number; spendRatio?: number }>> {
  const networks = (await grid.site(site).store.list(GRID_NETWORK)).items;
  const rows =
    (
      (networks[0]?.['status'] ?? {}) as {
        budgetStatus?: { tenantId: string; spendUsd: number; capUsd?: number; spendRatio?: number }[];
      }
    ).budgetStatus ?? [];
  return Object.fromEntries(rows.map((r) => [r.tenantId, r]));
}

/** Rewrites a site's GridNetwork manifest (what an operator edits with kubectl); the operator picks it up. */
function setCap(site: string, tenant: string, capUsd: number): void {
  const file = join(grid.site(site).manifestsDir, `${site}.yaml`);
  const docs = parseAllDocuments(readFileSync(file, 'utf8')).map(
    (d) => d.toJS() as { kind?: string; spec?: { budgetPolicy?: { tenants: { tenantId: string; capUsd: number }[] } } },
  );
  for (const doc of docs) {
    if (doc.kind !== 'GridNetwork') continue;
    for (const t of doc.spec!.budgetPolicy!.tenants) if (t.tenantId === tenant) t.capUsd = capUsd;
  }
  writeFileSync(file, docs.map((d) => stringifyYaml(d)).join('---\n'));
}

beforeAll(async () => {
  grid = await startLocalGrid({ distDir: join(REPO_ROOT, 'dist'), stateDir: join(runDir, 'state'), profile: 'fast' });
  // Readiness probes carry team-a's key, so their answers are spend too: priced like the rest.
  for (const listen of consumers()) {
    await waitFor(
      `a routed chat completion at ${listen}`,
      async () => {
        const result = await send(listen, { authorization: `Bearer ${grid.demoKey('team-a')!}` }, false).catch(
          () => ({ status: 0 }) as const,
        );
        if (result.status !== 200 || !('usage' in result) || result.usage === undefined) return undefined;
        price('team-a', result.usage);
        return true;
      },
      60_000,
      250,
    );
  }
}, 120_000);

afterAll(async () => {
  await grid?.stop();
  rmSync(runDir, { recursive: true, force: true });
});

describe('tenants on the local example grid', () => {
  it('mints one demo key per budgetPolicy tenant, kept 0600 in the state directory', () => {
    expect(grid.demoKeys.map((k) => k.tenant)).toEqual(['team-a', 'team-b']);
    expect(grid.demoKey('team-a')).toMatch(/^agn_[0-9a-f]{16}_/);
  });

  it('a missing, unknown or malformed key gets 401 (the OpenAI error codes)', async () => {
    const [listen] = consumers();
    expect(await send(listen!, {}, false)).toMatchObject({ status: 401, code: 'missing_api_key' });
    expect(await send(listen!, { authorization: `Bearer ${mintCallerKey('team-a').key}` }, false)).toMatchObject({
      status: 401,
      code: 'invalid_api_key',
    });
    expect(await send(listen!, { 'x-api-key': 'agn_not-a-key' }, true)).toMatchObject({
      status: 401,
      code: 'invalid_api_key',
    });
  });

  it("two tenants through both consumers, streamed and not: every site's budgetStatus converges to the priced usage, through a kill -9 of east's operator", async () => {
    const [c0, c1] = consumers();
    await spend(c0!, 'team-a', false);
    await spend(c1!, 'team-a', true);
    await spend(c0!, 'team-a', true);
    await spend(c0!, 'team-b', true);
    await spend(c1!, 'team-b', false);
    expect(spent['team-a']).toBeGreaterThan(0);
    expect(spent['team-b']).toBeGreaterThan(0);
    await converged();

    // east's operator (where both consumers report) is killed mid-run (kill -9) and restarted by the runner; traffic
    // goes on meanwhile. Its replayed and retried reports must neither lose nor double any spend.
    const operator = 'east/gossip-operator/gossip-operator';
    const pid = grid.running(operator)!.pid;
    process.kill(-pid, 'SIGKILL');
    await spend(c1!, 'team-b', true);
    await spend(c0!, 'team-a', false);
    await waitFor(
      'east operator restarted',
      async () =>
        grid.status(operator)?.state === 'running' && grid.running(operator)!.pid !== pid ? true : undefined,
      60_000,
      100,
    );
    await spend(c0!, 'team-b', false);
    await converged();
  }, 180_000);

  async function converged(): Promise<void> {
    for (const site of ['east', 'west']) {
      let last: unknown;
      const status = await waitFor(
        `${site}'s budgetStatus to show the priced spend`,
        async () => {
          const s = await budgetStatus(site);
          last = s;
          return ['team-a', 'team-b'].every((t) => Math.abs((s[t]?.spendUsd ?? -1) - spent[t]!) < 1e-9) ? s : undefined;
        },
        60_000,
        500,
      ).catch((error: Error) => {
        throw new Error(`${error.message}: expected ${JSON.stringify(spent)}, last ${JSON.stringify(last)}`);
      });
      for (const tenant of ['team-a', 'team-b']) {
        expect(Math.round(status[tenant]!.spendUsd * 100), `${site} ${tenant} to the cent`).toBe(
          Math.round(spent[tenant]! * 100),
        );
        expect(status[tenant]!.spendUsd).toBeCloseTo(spent[tenant]!, 9);
      }
    }
  }

  it('a tenant over its cap gets 429 insufficient_quota at every consumer; the other tenant still gets 200', async () => {
    // The example caps each tenant at 5 USD; lower team-a's cap below what it has spent, on both sites.
    for (const site of ['east', 'west']) setCap(site, 'team-a', spent['team-a']! / 2);
    for (const listen of consumers()) {
      await waitFor(
        `team-a refused at ${listen}`,
        async () => {
          // Answered 200 until the lowered cap reaches this consumer's budgets poll.
          const result = await send(listen, { authorization: `Bearer ${grid.demoKey('team-a')!}` }, false);
          return result.status === 429 ? result : undefined;
        },
        60_000,
        500,
      ).then((refused) => expect(refused).toMatchObject({ status: 429, code: 'insufficient_quota' }));
      expect((await send(listen, { authorization: `Bearer ${grid.demoKey('team-b')!}` }, false)).status).toBe(200);
      expect((await send(listen, { authorization: `Bearer ${grid.demoKey('team-b')!}` }, true)).status).toBe(200);
    }
  }, 120_000);

  it('no demo key, hash or salt in any log file of the grid', () => {
    const secrets = [
      ...grid.tokens(),
      ...grid.demoKeys.flatMap((k) => [Buffer.from(k.entry.hash), Buffer.from(k.entry.salt)]),
    ];
    expect(secrets.length).toBeGreaterThan(0);
    const files = readdirSync(grid.logDir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile());
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) {
      const text = readFileSync(join(file.parentPath, file.name));
      for (const secret of secrets) expect(text.includes(secret), `${file.name} leaks a secret`).toBe(false);
    }
  });
});
