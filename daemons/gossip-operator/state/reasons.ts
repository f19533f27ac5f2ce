// Why a gossiped state record was not merged. Stable strings: the metric `reason` label and the log key.
// Append-only.
export const STATE_DROP_REASONS = [
  'bad_payload', // delegate payload that is not a record batch of a known major version
  'bad_record', // record or body fails its schema (schemas/gossip/gossip-state-record.schema.json)
  'oversized_record', // record body above maxRecordBodyBytes
  'unsupported_major', // body schema_version of a newer major than this build speaks
  'wrong_network', // record of another GridNetwork: never enters this network's view
  'origin_mismatch', // signer is not the record's site, or the key does not belong to that network/site
  'unknown_signer', // no public key known (GridSite trust pin) for the signing site
  'bad_signature', // Ed25519 signature does not verify against the signer's key
  'revision_jump', // revision further ahead of our clock than maxRevisionAheadMs
  'private_key_pem', // public_cert_pem contains a PRIVATE KEY block: the record is discarded
  'stale', // not newer than the record we hold (duplicates and replays land here)
  'origin_records_full', // origin already has maxRecordsPerOrigin records
  'origins_full', // maxOrigins retained and none departed to evict
  'tombstone_collected', // a key this view does not hold, at or below its origin's collected tombstone floor
] as const;

export type StateDropReason = (typeof STATE_DROP_REASONS)[number];
