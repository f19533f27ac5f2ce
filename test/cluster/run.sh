#!/usr/bin/env bash
# npm run test:cluster: build (or reuse) the control-plane binaries, then run the cluster suite against them.
# Extra arguments go to vitest (e.g. a test file name).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
bin_dir="$(bash test/cluster/build-control-plane.sh | tail -n 1)"
export AGN_CONTROL_PLANE_BIN="$bin_dir"
exec npx vitest run --config test/cluster/vitest.config.ts "$@"
