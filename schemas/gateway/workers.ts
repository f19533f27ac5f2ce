// The gateway's `--workers N` bound, shared by the daemon (daemons/gateway/main.ts refuses a count outside it) and
// the compiler (constructs/gateway-workload.ts refuses it at synth), so a declaration never compiles to a command
// line the gateway rejects. More threads than this is a typo, not a sizing: a pod has far fewer cores.
export const MAX_GATEWAY_WORKERS = 64;
