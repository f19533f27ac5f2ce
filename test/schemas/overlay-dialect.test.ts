/**
 * Overlay validation per consumer dialect (schemas/overlay/dialect.ts): what this project's gateway (agn), Praxis AI
 * main and Praxis AI with selection groups accept, each rule with the Praxis source it comes from. Line numbers are
 * of filters/src/routing/overlay.rs in praxis-proxy/ai: "main" is commit aa2b3feb (no selection groups), "groups" is
 * commit 08f51242 (after PR #731, selection groups, and PR #1068, which added weightedRandom); the groups dialect is
 * PR #731 as its description lists the modes: deterministic, roundRobin, random.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../schemas/canonical-json.ts';
import {
  CONSUMER_DIALECTS,
  type ConsumerDialect,
  dialectSelection,
  featureReason,
} from '../../schemas/overlay/dialect.ts';
import { REFERENCE_REASON_ALIASES } from '../../schemas/overlay/reasons.ts';
import { overlayRevision } from '../../schemas/overlay/revision.ts';
import type { OverlayPayload, SelectionMode } from '../../schemas/overlay/types.ts';
import { GATEWAY_MAX_OVERLAY_BYTES, validateOverlay, type OverlayValidation } from '../../schemas/overlay/validate.ts';
import { SHARED_FIXTURES } from '../fixtures-path.ts';
import { candidate, envelope, mutated, payload } from './overlay-builders.ts';

const CONTRACT = join(SHARED_FIXTURES, 'overlay-contract-v1');

function verify(doc: string | Uint8Array, dialect: ConsumerDialect): OverlayValidation {
  return validateOverlay(doc, { maxBytes: GATEWAY_MAX_OVERLAY_BYTES, allowLegacy: false, dialect });
}

/** What Praxis AI main computes (main 606-617): SHA-256 of the JCS bytes of {candidates, local_site, network} only. */
function praxisMainDigest(doc: string): string {
  const { candidates, local_site, network } = JSON.parse(doc).overlay;
  return createHash('sha256').update(canonicalize({ candidates, local_site, network }), 'utf8').digest('hex');
}

const grouped = (mode?: SelectionMode): OverlayPayload =>
  payload({
    ...(mode === undefined ? {} : { selection_policy: { mode } }),
    candidates: [
      candidate({
        selection_group: 0,
        admission_state: 'new_and_existing',
        ...(mode === 'weightedRandom' ? { traffic_weight: 3 } : {}),
      }),
      candidate({
        cluster: 'provider-east-2',
        selection_group: 0,
        admission_state: 'new_and_existing',
        ...(mode === 'weightedRandom' ? { traffic_weight: 1 } : {}),
      }),
    ],
  });
const text = (p: OverlayPayload): string => JSON.stringify(envelope(p));

/** An envelope whose digest leaves selection_policy out, as Praxis AI main computes it, while still carrying one. */
function digestedWithoutPolicy(mode: SelectionMode): string {
  return mutated(envelope(grouped(mode)), (doc) => {
    const value = overlayRevision(doc.overlay, 'praxis-main');
    doc.revision.value = value;
    doc.content_digest.value = value;
  });
}

/** The payload changed after the builder (which emits contract keys only), with the digest recomputed as agn does. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
function redigested(p: OverlayPayload, change: (overlay: any) => void): string {
  return mutated(envelope(p), (doc) => {
    change(doc.overlay);
    const value = overlayRevision(doc.overlay);
    doc.revision.value = value;
    doc.content_digest.value = value;
  });
}

type Expect = { accept: true } | { reason: string; message: RegExp };
interface Case {
  readonly name: string;
  readonly doc: () => string;
  readonly verdicts: Readonly<Record<ConsumerDialect, Expect>>;
}

const accepted = { accept: true } as const;

const CASES: readonly Case[] = [
  {
    // Without selection_policy every consumer hashes the same fields (main 606-617; groups adds selection_policy
    // only when present, 703-705), so one document is accepted everywhere with one revision.
    name: 'no selection_policy, schema 1.0.0',
    doc: () => text(grouped()),
    verdicts: { agn: accepted, 'praxis-main': accepted, 'praxis-groups': accepted },
  },
  {
    // main: OverlayDocument has no selection_policy (208-222) and ignores unknown fields, so its digest leaves the
    // policy out (606-617) and the declared one, which covers it, is refused (428-431): "envelope digest mismatch".
    name: 'selection_policy roundRobin, digest over it',
    doc: () => text(grouped('roundRobin')),
    verdicts: {
      agn: accepted,
      'praxis-main': { reason: 'digest_mismatch', message: /praxis-main computes without selection_policy/ },
      'praxis-groups': accepted,
    },
  },
  {
    // groups: PickerPolicy is camelCase (232-233); PR #731 knows deterministic, roundRobin and random only, so
    // serde refuses weightedRandom as "unknown variant `weightedRandom`".
    name: 'selection_policy weightedRandom with traffic weights',
    doc: () => text(grouped('weightedRandom')),
    verdicts: {
      agn: accepted,
      'praxis-main': { reason: 'digest_mismatch', message: /computed [0-9a-f]{64}, which praxis-main/ },
      'praxis-groups': {
        reason: 'invalid_selection_policy',
        message: /unknown variant "weightedRandom", expected one of deterministic, roundRobin, random/,
      },
    },
  },
  {
    name: 'selection_policy random',
    doc: () => text(grouped('random')),
    verdicts: {
      agn: accepted,
      'praxis-main': { reason: 'digest_mismatch', message: /selection_policy/ },
      'praxis-groups': accepted,
    },
  },
  {
    name: 'selection_policy deterministic',
    doc: () => text(grouped('deterministic')),
    verdicts: {
      agn: accepted,
      'praxis-main': { reason: 'digest_mismatch', message: /selection_policy/ },
      'praxis-groups': accepted,
    },
  },
  {
    // The finding: with selection_policy removed and re-digested, Praxis main accepts. A document that keeps
    // the field but is digested without it is accepted by main (it never reads the field) and refused by the
    // consumers that hash it (groups 703-705).
    name: 'selection_policy present, digest without it',
    doc: () => digestedWithoutPolicy('roundRobin'),
    verdicts: {
      agn: { reason: 'digest_mismatch', message: /does not match the content/ },
      'praxis-main': accepted,
      'praxis-groups': { reason: 'digest_mismatch', message: /does not match the content/ },
    },
  },
  {
    // main 198 and 409-414: schema_version must equal "1.0.0" exactly ("unsupported envelope schema version"), and
    // groups keeps the same check (200, 464). Our gateway accepts any 1.x (docs/contract.md §2.4 step 3).
    name: 'schema_version 1.1.0',
    doc: () =>
      mutated(envelope(grouped()), (doc) => {
        doc.schema_version = '1.1.0';
      }),
    verdicts: {
      agn: accepted,
      'praxis-main': {
        reason: 'unsupported_schema',
        message: /"1\.1\.0" is not supported by praxis-main \(exactly "1\.0\.0"\)/,
      },
      'praxis-groups': { reason: 'unsupported_schema', message: /not supported by praxis-groups/ },
    },
  },
  {
    name: 'schema_version 2.0.0',
    doc: () =>
      mutated(envelope(grouped()), (doc) => {
        doc.schema_version = '2.0.0';
      }),
    verdicts: {
      agn: { reason: 'unsupported_schema', message: /1\.x expected/ },
      'praxis-main': { reason: 'unsupported_schema', message: /1\.x expected/ },
      'praxis-groups': { reason: 'unsupported_schema', message: /1\.x expected/ },
    },
  },
  {
    // PR #731 denies unknown fields in selection_policy (the check); so does our contract (docs/contract.md
    // §2.4 step 7).
    name: 'selection_policy with an unknown key',
    doc: () =>
      redigested(grouped('random'), (overlay) => {
        overlay.selection_policy.weights = 'x';
      }),
    verdicts: {
      agn: { reason: 'invalid_selection_policy', message: /unknown key "weights"/ },
      'praxis-main': { reason: 'digest_mismatch', message: /selection_policy/ },
      'praxis-groups': { reason: 'invalid_selection_policy', message: /unknown key "weights"/ },
    },
  },
  {
    // main's OverlayCandidate (229 ff.) has no selection_group and ignores unknown candidate keys: broken groups
    // are not its concern. The consumers that read groups refuse them.
    name: 'selection groups that do not start at 0',
    doc: () => text(payload({ candidates: [candidate({ selection_group: 1 })] })),
    verdicts: {
      agn: { reason: 'invalid_candidate', message: /must start at 0/ },
      'praxis-main': accepted,
      'praxis-groups': { reason: 'invalid_candidate', message: /must start at 0/ },
    },
  },
  {
    // Credentials are references only in every dialect: main 280-305 deny unknown fields in credential (OverlayCredential) and secretRef (OverlaySecretRef).
    name: 'credential with a token key',
    doc: () =>
      redigested(grouped(), (overlay) => {
        overlay.candidates[0].credential = {
          strategy: 'bearer_token',
          secretRef: { name: 's', namespace: 'n', key: 'k' },
          token: 'sk-live-123',
        };
      }),
    verdicts: {
      agn: { reason: 'invalid_candidate', message: /has key "token"/ },
      'praxis-main': { reason: 'invalid_candidate', message: /has key "token"/ },
      'praxis-groups': { reason: 'invalid_candidate', message: /has key "token"/ },
    },
  },
];

describe('overlay verdicts per consumer dialect', () => {
  for (const c of CASES) {
    for (const dialect of CONSUMER_DIALECTS) {
      it(`${c.name}: ${dialect}`, () => {
        const doc = c.doc();
        const verdict = verify(doc, dialect);
        const expected = c.verdicts[dialect];
        if ('accept' in expected) {
          expect(verdict, JSON.stringify(verdict)).toMatchObject({ ok: true, format: 'envelope' });
          if (verdict.ok && verdict.format === 'envelope') {
            // The accepted revision is the digest that consumer computes from the raw document.
            const raw = JSON.parse(doc).overlay;
            expect(verdict.revision).toBe(overlayRevision(raw, dialect));
            if (dialect === 'praxis-main') expect(verdict.revision).toBe(praxisMainDigest(doc));
          }
        } else {
          expect(verdict).toMatchObject({ ok: false, reason: expected.reason });
          if (!verdict.ok) {
            expect(verdict.message).toMatch(expected.message);
            expect(verdict.message).not.toContain('sk-live-123');
          }
        }
      });
    }
  }

  it('names the digest Praxis main computes when it refuses an overlay that carries selection_policy', () => {
    const doc = text(grouped('weightedRandom'));
    const verdict = verify(doc, 'praxis-main');
    expect(verdict.ok).toBe(false);
    if (!verdict.ok) expect(verdict.message).toContain(`computed ${praxisMainDigest(doc)}`);
  });
});

describe('the reference fixtures under every dialect', () => {
  const manifest = JSON.parse(readFileSync(join(CONTRACT, 'manifest.json'), 'utf8')).fixtures as Record<
    string,
    { expected: string; reason?: string; revision?: string }
  >;
  // The fixtures come from praxis-proxy/ai (manifest "source") and carry no selection_policy: every dialect gives
  // the verdict and revision Praxis gives.
  for (const [file, expectation] of Object.entries(manifest)) {
    if (expectation.expected === 'accept_legacy') continue;
    for (const dialect of CONSUMER_DIALECTS) {
      it(`${file}: ${dialect}`, () => {
        const verdict = verify(readFileSync(join(CONTRACT, file)), dialect);
        if (expectation.expected === 'accept') {
          expect(verdict).toMatchObject({ ok: true, revision: expectation.revision });
        } else {
          expect(verdict).toMatchObject({
            ok: false,
            reason: REFERENCE_REASON_ALIASES[expectation.reason!] ?? expectation.reason,
          });
        }
      });
    }
  }

  it('valid-selection-policy.json (roundRobin): accepted by agn and praxis-groups with its revision, refused by praxis-main', () => {
    const bytes = readFileSync(join(CONTRACT, 'valid-selection-policy.json'));
    const revision = 'd3321586b5e414b8bd80c07a9d16ac10dce38d6810e3591a8526a6bdd0639007';
    expect(verify(bytes, 'agn')).toMatchObject({ ok: true, revision });
    expect(verify(bytes, 'praxis-groups')).toMatchObject({ ok: true, revision });
    expect(verify(bytes, 'praxis-main')).toMatchObject({ ok: false, reason: 'digest_mismatch' });
  });
});

describe('dialectSelection: the mode each consumer is given and what it will not honour', () => {
  const table: readonly [SelectionMode | undefined, ConsumerDialect, SelectionMode | undefined, readonly string[]][] = [
    [undefined, 'agn', undefined, []],
    [undefined, 'praxis-main', undefined, []],
    [undefined, 'praxis-groups', undefined, []],
    ['weightedRandom', 'agn', 'weightedRandom', []],
    ['roundRobin', 'agn', 'roundRobin', []],
    // main has no selection_policy: nothing is published; first admitted wins, which is deterministic's behaviour.
    ['deterministic', 'praxis-main', undefined, []],
    ['roundRobin', 'praxis-main', undefined, ['selection_mode_ignored']],
    ['random', 'praxis-main', undefined, ['selection_mode_ignored']],
    ['weightedRandom', 'praxis-main', undefined, ['weighted_split_collapsed']],
    // groups has the three PR #731 modes; weightedRandom degrades to random, the nearest one that still spreads load.
    ['deterministic', 'praxis-groups', 'deterministic', []],
    ['roundRobin', 'praxis-groups', 'roundRobin', []],
    ['random', 'praxis-groups', 'random', []],
    ['weightedRandom', 'praxis-groups', 'random', ['weighted_split_as_random']],
  ];
  it.each(table)('%s for %s: publishes %s, does not honour %j', (mode, dialect, published, features) => {
    const selection = dialectSelection(mode, dialect);
    expect(selection.mode).toBe(published);
    expect(selection.unhonoured.map((u) => u.feature)).toEqual(features);
    for (const u of selection.unhonoured) expect(u.message.length).toBeGreaterThan(20);
  });

  it('gives condition reasons in CamelCase', () => {
    expect(featureReason('weighted_split_collapsed')).toBe('WeightedSplitCollapsed');
    expect(featureReason('weighted_split_as_random')).toBe('WeightedSplitAsRandom');
  });
});
