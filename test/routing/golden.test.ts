/**
 * Golden overlays: whole scenarios in test/fixtures/routing/*.input.json are rendered and compared byte for byte
 * with the committed ConfigMap text (`<scenario>.<gateway>.overlay.json`) and exclusion report
 * (`<scenario>.report.json`). A diff here is a change of what gateways receive: review it like code.
 * Regenerate with `UPDATE_GOLDEN=1 npx vitest run --config test/vitest.config.ts test/routing/golden.test.ts`.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { serializeOverlay } from '../../schemas/overlay/envelope.ts';
import { renderNetwork } from '../../daemons/routing/index.ts';
import type { GatewayReference, NetworkRoutingInput, RenderSource } from '../../daemons/routing/model.ts';
import { expectGatewayAccepts, rendered } from './fixtures.ts';

const DIR = join(import.meta.dirname, '..', 'fixtures', 'routing');
const UPDATE = process.env['UPDATE_GOLDEN'] === '1';

interface Scenario {
  readonly description: string;
  readonly now: string;
  readonly source: RenderSource;
  readonly gateways: readonly GatewayReference[];
  readonly input: NetworkRoutingInput;
}

function golden(file: string, actual: string): void {
  const path = join(DIR, file);
  if (UPDATE) writeFileSync(path, actual);
  expect(existsSync(path), `${file} is missing; run with UPDATE_GOLDEN=1 to create it`).toBe(true);
  expect(actual).toBe(readFileSync(path, 'utf8'));
}

const scenarios = readdirSync(DIR)
  .filter((f) => f.endsWith('.input.json'))
  .sort();

describe('golden overlays', () => {
  it('has scenarios', () => {
    expect(scenarios.length).toBeGreaterThanOrEqual(2);
  });

  it.each(scenarios)('%s renders to the committed overlays', (file) => {
    const name = file.replace(/\.input\.json$/, '');
    const scenario = JSON.parse(readFileSync(join(DIR, file), 'utf8')) as Scenario;
    const result = renderNetwork(
      scenario.input,
      scenario.gateways,
      scenario.source,
      Date.parse(scenario.now),
      new Map(),
    );
    const report: Record<string, unknown> = { excluded: result.excluded, gateways: {} };
    for (const { gateway, result: outcome } of result.gateways) {
      const overlay = rendered(outcome);
      expectGatewayAccepts(overlay, gateway);
      golden(`${name}.${gateway.name}.overlay.json`, serializeOverlay(overlay.envelope));
      (report['gateways'] as Record<string, unknown>)[gateway.name] = {
        revision: overlay.revision,
        configMap: overlay.configMapName,
        excluded: overlay.excluded,
      };
    }
    golden(`${name}.report.json`, serializeOverlay(report));
  });
});
