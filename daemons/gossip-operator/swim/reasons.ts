// The catalogue of reasons a SWIM packet or message is dropped. Each string is stable: it becomes the
// `reason` label of the operator's drop counter and appears once in the log. Append-only.
export const SWIM_DROP_REASONS = [
  'oversized', // datagram or stream message above maxPacketBytes / maxMessageBytes
  'bad_frame', // too short, wrong magic, or unknown frame version byte
  'decrypt_failed', // no key in the ring authenticates the frame (wrong key, tampered, truncated)
  'plaintext_rejected', // unencrypted frame while a key ring is configured (never fall back to plaintext)
  'encrypted_unexpected', // encrypted frame while no key ring is configured
  'replayed', // nonce already seen inside the replay window
  'stale_packet', // sender timestamp outside the replay window
  'bad_json', // plaintext is not JSON
  'bad_packet', // JSON that does not match the packet schema
  'unsupported_version', // frame (wire) version or packet major version newer than this build speaks
  'bad_message', // a message of a known kind that fails its schema
  'unknown_kind', // message kind from a newer minor version (ignored, counted)
  'members_full', // alive message for a new member while maxMembers are tracked
  'address_conflict', // alive message claiming a live member's name from another address
  'queue_full', // membership update queue overflow
  'broadcast_too_large', // a broadcast that can never fit in one packet (delegate must use push-pull)
  'push_pull_failed', // TCP state exchange failed or timed out
  'delegate_error', // the state delegate threw while handling a message (contained here)
  'reflected', // a frame whose authenticated sender is this member itself (reflected back to us)
  'unexpected_ack', // ack or nack from a member other than the one probed (or the helpers asked to probe it)
  'stream_limit', // inbound push-pull stream refused: maxInboundStreams are open already
  'stream_deadline', // inbound push-pull stream cut off: not finished within the stream deadline
  'internal_error', // a protocol round threw (a bug): contained so the loop and the daemon keep running
] as const;

export type SwimDropReason = (typeof SWIM_DROP_REASONS)[number];
