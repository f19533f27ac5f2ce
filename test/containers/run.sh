#!/usr/bin/env bash
# npm run test:containers: build the project image (npm run image: installs mmdebstrap/podman/runc from Debian when
# missing), build or reuse the control-plane binaries of the cluster suite, then run every compiled workload of
# dist/ from the image under podman against real kube-apiservers. Extra arguments go to vitest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
npm run --silent image
bin_dir="$(bash test/cluster/build-control-plane.sh | tail -n 1)"
export AGN_CONTROL_PLANE_BIN="$bin_dir"
export CONTAINERS_CONF="$root/image/containers.conf"
exec npx vitest run --config test/containers/vitest.config.ts "$@"
