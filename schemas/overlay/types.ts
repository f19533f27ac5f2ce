/** The overlay contract's types, generated from overlay-envelope.schema.json (npm run gen:types). */
export type {
  CredentialReference,
  OverlayCandidate,
  OverlayContentDigest,
  OverlayEnvelope,
  OverlayPayload,
  OverlayProvenance,
  OverlayRevision,
  OverlayScope,
  ScoreBreakdown,
  SelectionPolicy,
} from '../generated/overlay-envelope.ts';

export type SelectionMode = import('../generated/overlay-envelope.ts').SelectionPolicy['mode'];
export type CandidateKind = import('../generated/overlay-envelope.ts').OverlayCandidate['kind'];
export type AdmissionState = NonNullable<
  import('../generated/overlay-envelope.ts').OverlayCandidate['admission_state']
>;
