/**
 * Consumer dialects: what a consumer gateway of the overlay is, and so which overlay it accepts and what of the
 * selection policy it honours. The dialect names are the GridNetwork schema's enum (spec.consumerGateways[].dialect),
 * the one source of truth; the rules below are what each consumer's loader does, cited where it does it
 * (praxis-proxy/ai filters/src/routing/overlay.rs, and PR #731 "feat(routing): add provider load balancing").
 */
import gridNetworkSchema from '../crds/gridnetworks.schema.json' with { type: 'json' };
import type { GatewayRef } from '../generated/gridnetworks.ts';
import type { SelectionMode } from './types.ts';

export type ConsumerDialect = NonNullable<GatewayRef['dialect']>;

const dialectProperty = gridNetworkSchema.properties.spec.properties.consumerGateways.items.properties.dialect;
export const CONSUMER_DIALECTS = dialectProperty.enum as readonly ConsumerDialect[];
export const DEFAULT_CONSUMER_DIALECT = dialectProperty.default as ConsumerDialect;

export function isConsumerDialect(value: unknown): value is ConsumerDialect {
  return typeof value === 'string' && (CONSUMER_DIALECTS as readonly string[]).includes(value);
}

export interface DialectRules {
  /**
   * The only schema_version accepted, or undefined for any 1.x (docs/contract.md §2.4 step 3). Praxis AI compares the
   * string with "1.0.0" exactly (overlay.rs@aa2b3feb lines 198 and 409).
   */
  readonly exactSchemaVersion?: string;
  /**
   * Whether selection_policy is part of the document this consumer reads and hashes. Praxis AI main's
   * OverlayDocument has no such field (overlay.rs@aa2b3feb lines 208-222) and its digest covers only candidates,
   * local_site and network (lines 606-617): it ignores the policy and hashes the payload without it.
   */
  readonly readsSelectionPolicy: boolean;
  /** selection_policy.mode values it accepts; anything else is refused as an unknown variant. */
  readonly selectionModes: ReadonlySet<SelectionMode>;
  /**
   * Whether it reads selection_group and traffic_weight. Praxis AI main's OverlayCandidate has neither
   * (overlay.rs@aa2b3feb line 229 ff.) and ignores unknown candidate keys, so it neither honours nor checks them.
   */
  readonly readsSelectionGroups: boolean;
}

const ALL_MODES: ReadonlySet<SelectionMode> = new Set(
  gridNetworkSchema.properties.spec.properties.selectionPolicy.properties.mode.enum as SelectionMode[],
);

export const DIALECT_RULES: Readonly<Record<ConsumerDialect, DialectRules>> = {
  agn: { readsSelectionPolicy: true, selectionModes: ALL_MODES, readsSelectionGroups: true },
  'praxis-main': {
    exactSchemaVersion: '1.0.0',
    readsSelectionPolicy: false,
    selectionModes: new Set(),
    readsSelectionGroups: false,
  },
  // PR #731 lists exactly these three modes; a later Praxis AI (PR #1068, overlay.rs@08f51242 line 242) added
  // weightedRandom, which the selection-groups dialect does not have.
  'praxis-groups': {
    exactSchemaVersion: '1.0.0',
    readsSelectionPolicy: true,
    selectionModes: new Set<SelectionMode>(['deterministic', 'roundRobin', 'random']),
    readsSelectionGroups: true,
  },
};

/**
 * A part of the GridNetwork's selection policy a consumer will not honour. Append only: the values are the
 * `feature` label of grid_overlay_unhonoured_features and, in CamelCase, the condition reason.
 */
export const UNHONOURED_FEATURES = [
  'weighted_split_collapsed', // praxis-main under weightedRandom: every request goes to the first admitted candidate
  'selection_mode_ignored', // praxis-main under roundRobin or random: every request goes to the first admitted candidate
  'weighted_split_as_random', // praxis-groups under weightedRandom: published as random, capacity weights dropped
] as const;
export type UnhonouredFeature = (typeof UNHONOURED_FEATURES)[number];

export interface DialectSelection {
  /** The selection_policy.mode to publish for this consumer, undefined for none. */
  readonly mode: SelectionMode | undefined;
  /** What of the configured mode the consumer will not honour, with a sentence saying what happens instead. */
  readonly unhonoured: readonly { readonly feature: UnhonouredFeature; readonly message: string }[];
}

/**
 * The selection policy a consumer of `dialect` is given for the GridNetwork's configured `mode`. Only what the
 * policy actually uses is reported: deterministic, or no policy, is what every dialect does.
 *
 * weightedRandom degrades to random for praxis-groups: both spread new requests over the first viable group, which
 * is the nearest mode it has; deterministic would send everything to one provider, as Praxis main does.
 */
export function dialectSelection(mode: SelectionMode | undefined, dialect: ConsumerDialect): DialectSelection {
  if (mode === undefined || dialect === 'agn') return { mode, unhonoured: [] };
  if (dialect === 'praxis-main') {
    if (mode === 'deterministic') return { mode: undefined, unhonoured: [] };
    if (mode === 'weightedRandom') {
      return {
        mode: undefined,
        unhonoured: [
          {
            feature: 'weighted_split_collapsed',
            message:
              'Praxis AI main has no selection_policy: weightedRandom splits by capacityWeight collapse to the first admitted candidate',
          },
        ],
      };
    }
    return {
      mode: undefined,
      unhonoured: [
        {
          feature: 'selection_mode_ignored',
          message: `Praxis AI main has no selection_policy: ${mode} is ignored and the first admitted candidate takes every new request`,
        },
      ],
    };
  }
  if (DIALECT_RULES[dialect].selectionModes.has(mode)) return { mode, unhonoured: [] };
  return {
    mode: 'random',
    unhonoured: [
      {
        feature: 'weighted_split_as_random',
        message:
          'Praxis AI with selection groups has no weightedRandom: published as random, capacityWeight ratios are not applied',
      },
    ],
  };
}

/** `weighted_split_collapsed` → `WeightedSplitCollapsed`, the condition reason form. */
export function featureReason(feature: UnhonouredFeature): string {
  return feature
    .split('_')
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('');
}
