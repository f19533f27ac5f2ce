import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { extensionKeyPointers, praxisRuleProblems } from '../schemas/gateway/praxis-rules.ts';
import type { GatewayConfig } from '../schemas/generated/gateway-config.ts';

/**
 * Synth-time check of a rendered gateway config against the one schema the gateway itself loads
 * (schemas/gateway/gateway-config.schema.json) and Praxis AI's cross-field rules beside it, so a config that our
 * gateway or Praxis AI would refuse at startup fails synth instead. The compiler renders no extension key, so every
 * compiled praxis.yaml is one Praxis AI accepts, with declared exceptions: a consumer gateway whose declaration names
 * caller keys, gridServing or localLoad renders what `extensionFilters` lists (whole filters such as caller_auth,
 * usage_meter, grid_site_route, and `filter/key` for one key of a Praxis AI filter, intelligent_route/local_load) and
 * nothing else.
 */

let compiled: ValidateFunction | undefined;
let siteRoute: ValidateFunction | undefined;

function validator(): ValidateFunction {
  if (compiled === undefined) {
    const schema = JSON.parse(
      readFileSync(new URL('../schemas/gateway/gateway-config.schema.json', import.meta.url), 'utf8'),
    ) as { $id: string };
    const ajv = new Ajv2020({ allErrors: true, strict: false });
    compiled = ajv.compile(schema);
    siteRoute = ajv.getSchema(`${schema.$id}#/$defs/GridSiteRouteFilter`);
  }
  return compiled;
}

/**
 * Problems of one grid_site_route filter block on its own, pointers relative to the filter: the whole-config check
 * reports a bad block only through the filter union's every branch, which names nothing a user declared.
 */
export function siteRouteProblems(filter: unknown): GatewayConfigProblem[] {
  validator();
  if (siteRoute === undefined || siteRoute(filter)) return [];
  return (siteRoute.errors ?? []).map(describe);
}

export interface GatewayConfigProblem {
  /** JSON pointer into the config (`/filter_chains/0/filters/2/clusters/1`). */
  readonly pointer: string;
  readonly message: string;
}

function describe(error: ErrorObject): GatewayConfigProblem {
  const extra =
    error.keyword === 'additionalProperties'
      ? ` (${String((error.params as { additionalProperty?: string }).additionalProperty)})`
      : '';
  return {
    pointer: error.instancePath === '' ? '/' : error.instancePath,
    message: `${error.message ?? error.keyword}${extra}`,
  };
}

/** A key of one filter (the filter name or any key inside it): inside an extension filter every key is ours. */
const FILTER_KEY_POINTER = /^\/filter_chains\/(\d+)\/filters\/(\d+)\/([^/]+)/;

/** Problems of a config, empty when it is valid. A `oneOf` miss is reported once, not once per branch. */
export function gatewayConfigProblems(
  config: GatewayConfig | unknown,
  extensionFilters: readonly string[] = [],
): GatewayConfigProblem[] {
  const declared = (pointer: string): boolean => {
    const match = FILTER_KEY_POINTER.exec(pointer);
    if (match === null) return false;
    const filter = (config as GatewayConfig).filter_chains[Number(match[1])]?.filters[Number(match[2])]?.filter;
    return (
      filter !== undefined && (extensionFilters.includes(filter) || extensionFilters.includes(`${filter}/${match[3]}`))
    );
  };
  const validate = validator();
  if (validate(config)) {
    return [
      ...praxisRuleProblems(config as GatewayConfig).map((problem) => ({
        pointer: problem.pointer,
        message: problem.message,
      })),
      ...extensionKeyPointers(config)
        .filter((pointer) => !declared(pointer))
        .map((pointer) => ({
          pointer,
          message: 'an extension key of this gateway: Praxis AI refuses it, so the compiler must not render it',
        })),
    ];
  }
  const errors = validate.errors ?? [];
  const seen = new Set<string>();
  const problems: GatewayConfigProblem[] = [];
  for (const error of errors) {
    const problem = describe(error);
    const key = `${problem.pointer} ${problem.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    problems.push(problem);
  }
  return problems;
}
