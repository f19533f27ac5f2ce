#!/usr/bin/env bash
# Builds test/praxis/praxis-check (the real Praxis config loader and validator, praxis-proxy 0.5.3 from crates.io)
# once, into a cache directory outside the repository keyed by its Cargo.lock. A no-op when the binary is there.
# Prints the binary's path as its last stdout line.
#
# Needs only cargo and crates.io. praxis-proxy 0.5.3 declares rust-version 1.96; it builds with 1.95
# (--ignore-rust-version), and the binary runs nothing but the config code.
#
#   AGN_PRAXIS_CHECK_CACHE  cache root (default ~/.cache/agn-praxis-check)
#   AGN_BUILD_NICE          niceness for the build (default 15: the build shares 2 cores with everything else)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
crate_dir="$here/praxis-check"
cache_root="${AGN_PRAXIS_CHECK_CACHE:-$HOME/.cache/agn-praxis-check}"
# The key covers every input of the build: bumping a pin in Cargo.lock or changing the checker builds afresh.
key="$(cat "$crate_dir/Cargo.lock" "$crate_dir/Cargo.toml" "$crate_dir/src/main.rs" | sha256sum | cut -c1-16)"
out="$cache_root/bin-$key"
nice_level="${AGN_BUILD_NICE:-15}"

if [[ -x "$out/praxis-check" ]]; then
  echo "build-praxis-check: cached $out" >&2
  echo "$out/praxis-check"
  exit 0
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "build-praxis-check: cargo is not on PATH; the real-Praxis suite builds praxis-proxy 0.5.3 with it" >&2
  exit 1
fi

# The crates' C parts (aws-lc-sys, ring, zstd, jemalloc, libz-ng-sys) need a C compiler and cmake: Debian's.
if ! command -v cc >/dev/null 2>&1 || ! command -v cmake >/dev/null 2>&1; then
  echo "build-praxis-check: installing Debian's gcc and cmake for the crates' C parts" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq gcc cmake >/dev/null
fi

mkdir -p "$out"
# The target directory is shared across keys so a changed checker recompiles only itself.
export CARGO_TARGET_DIR="$cache_root/target"
start=$(date +%s)
echo "build-praxis-check: cargo build (praxis-proxy 0.5.3), load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
(cd "$crate_dir" && nice -n "$nice_level" cargo build --release --locked --ignore-rust-version --quiet)
# Copy, then rename, so an interrupted build never looks cached.
cp "$CARGO_TARGET_DIR/release/praxis-check" "$out/praxis-check.tmp"
mv "$out/praxis-check.tmp" "$out/praxis-check"
echo "build-praxis-check: built in $(( $(date +%s) - start )) s into $out" >&2
echo "$out/praxis-check"
