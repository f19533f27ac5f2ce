#!/usr/bin/env bash
# Known vulnerabilities of the NetworkPolicy engine the node suite runs, as build-node.sh builds it: govulncheck in
# binary mode (the modules and the Go release linked in, and what the engine calls) against the Go vulnerability
# database. vuln.go.dev is out of reach here, so the database is made offline from the advisories' own module,
# golang.org/x/vulndb, with its indexdb command. Exits 0 when nothing is found, 3 (govulncheck's) when something is.
# Run it after a bump of netpol/go.mod or of the Go release build-node.sh builds the engine with; not part of CI (it
# downloads the advisories, about 40 MB).
#
#   AGN_VULNCHECK_CACHE   where the tools and the database go (default ~/.cache/agn-vulncheck)
#   AGN_VULNDB_VERSION    the golang.org/x/vulndb pseudo-version to take the advisories from (default below)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The newest advisories the Go module proxy serves this project: golang.org/x/vulndb as of 2026-11-05 23:49:57 UTC.
vulndb_version="${AGN_VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}"
vuln_version=v1.9.0
cache="${AGN_VULNCHECK_CACHE:-$HOME/.cache/agn-vulncheck}"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod

mkdir -p "$cache/bin"
[[ -x "$cache/bin/govulncheck" ]] || GOBIN="$cache/bin" go install "golang.org/x/vuln/cmd/govulncheck@$vuln_version"
[[ -x "$cache/bin/indexdb-$vulndb_version" ]] || {
  GOBIN="$cache/bin" go install "golang.org/x/vulndb/cmd/indexdb@$vulndb_version"
  mv "$cache/bin/indexdb" "$cache/bin/indexdb-$vulndb_version"
}

db="$cache/db-$vulndb_version"
if [[ ! -f "$db/index/db.json" ]]; then
  advisories="$(go mod download -json "golang.org/x/vulndb@$vulndb_version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$advisories/data/osv" ]] || { echo "vulncheck: no data/osv in golang.org/x/vulndb@$vulndb_version" >&2; exit 1; }
  rm -rf "$db.tmp"
  "$cache/bin/indexdb-$vulndb_version" -vulns "$advisories/data/osv" -out "$db.tmp"
  # The OSV files carry no modification times (the database's publisher takes them from git): the database is as
  # new as the vulndb commit its pseudo-version names.
  stamp="${vulndb_version%-*}"
  stamp="${stamp##*-}"
  printf '{"modified":"%s-%s-%sT%s:%s:%sZ"}' "${stamp:0:4}" "${stamp:4:2}" "${stamp:6:2}" "${stamp:8:2}" \
    "${stamp:10:2}" "${stamp:12:2}" >"$db.tmp/index/db.json"
  mv "$db.tmp" "$db"
fi

engine="$(bash "$here/../build-node.sh" | tail -n 1)/kube-network-policies"
echo "vulncheck: $engine against golang.org/x/vulndb@$vulndb_version ($(cat "$db/index/db.json"))" >&2
"$cache/bin/govulncheck" -db "file://$db" -mode binary "$engine"
