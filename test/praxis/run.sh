#!/usr/bin/env bash
# npm run test:praxis: build (or reuse) the real-Praxis checker, then run the suite that feeds it our configs.
# Extra arguments go to vitest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
AGN_PRAXIS_CHECK="$(bash test/praxis/build-praxis-check.sh | tail -n 1)"
export AGN_PRAXIS_CHECK
exec npx vitest run --config test/praxis/vitest.config.ts "$@"
