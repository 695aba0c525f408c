#!/usr/bin/env bash
# Builds the real Kubernetes control plane the tests run (kube-apiserver,
# kube-controller-manager and the etcd they store in, pinned in
# tools/kube/go.mod), CoreDNS, the peer they compare with (pinned in
# tools/coredns/go.mod), and the release tooling, Helm and actionlint
# (pinned in tools/release/go.mod), with the machine's Go, once, into a
# cache outside the clone, and prints the directory holding them.
# A second call with the same pin prints the same directory at once.
#
#   scripts/kube-tools.sh            # build if needed; print the bin directory
#   scripts/kube-tools.sh --check    # print it if built, else exit 1 quietly
#   scripts/kube-tools.sh --print-dir  # print where this pin's build goes
#
# Environment: KUBE_TOOLS_CACHE (default ~/.cache/kube-dns-rs/kube): the
# cache; one subdirectory per pin (a hash of the modules' go.mod and go.sum,
# this script, and Go's version, OS and architecture). Go is needed for every call,
# built or not: the pin's hash asks it.
# Go's module cache is used as usual (go env GOMODCACHE); its build cache is
# a temporary one, removed once the binaries are built.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
module="$root/tools/kube"
modules=(kube coredns release)
cache=${KUBE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-dns-rs/kube}
# Absolute: the builds run from the modules' directories (go build -o,
# GOCACHE). In bash alone: the script's first checks run with a bare PATH.
case $cache in
  /*) ;;
  *) cache="$PWD/$cache" ;;
esac
# Binary name and Go package, for each.
tools=(kube-apiserver kube-controller-manager etcd coredns helm actionlint)
declare -A package=(
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  # The etcd Kubernetes supports (3.5+): Debian's 3.4 runs the DNS pod's
  # records only (the v2 API is gone from 3.6).
  [etcd]=go.etcd.io/etcd/server/v3
  [coredns]=github.com/coredns/coredns
  [helm]=helm.sh/helm/v3/cmd/helm
  [actionlint]=github.com/rhysd/actionlint/cmd/actionlint
)
# The module (under tools/) each is built in.
declare -A module_of=(
  [kube-apiserver]=kube [kube-controller-manager]=kube [etcd]=kube [coredns]=coredns
  [helm]=release [actionlint]=release
)

fail() { echo "kube-tools: $*" >&2; exit 1; }

command -v go >/dev/null ||
  fail "Go is missing: the tests build kube-apiserver from tools/kube with Go >= 1.26 (go.mod's 'go' line); install Go 1.26 and put it on PATH (/usr/local/go/bin)."
# Never let the go command fetch another toolchain: the machine's Go builds.
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly
want=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$module/go.mod")
have=$(go env GOVERSION | sed 's/^go//')
[ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1)" = "$want" ] ||
  fail "Go $have is older than tools/kube/go.mod's go $want: install Go $want or newer (no toolchain is downloaded: GOTOOLCHAIN=local)."

key=$(for m in "${modules[@]}"; do cat "$root/tools/$m/go.mod" "$root/tools/$m/go.sum"; done |
  cat - "$0" <(go env GOVERSION GOOS GOARCH) | sha256sum | cut -c1-16)
dir="$cache/$key"
built() { [ -f "$dir/.complete" ] && for t in "${tools[@]}"; do [ -x "$dir/$t" ] || return 1; done; }

case "${1:-}" in
  --check) built && echo "$dir" && exit 0; exit 1 ;;
  --print-dir) echo "$dir"; exit 0 ;;
  "") ;;
  *) fail "unknown argument: $1 (--check, --print-dir or none)" ;;
esac
built && { echo "$dir"; exit 0; }

mkdir -p "$cache"
# One build at a time: test binaries that start a control plane call this
# script concurrently; the second waits for the first's build.
exec 9>"$cache/.lock"
flock 9
built && { echo "$dir"; exit 0; }
# Under the lock no build runs: a temporary directory left is a build that
# was killed (its trap never ran), Go's build cache inside it (~4 GB).
for stale in "$cache"/*.tmp.*; do
  [ -e "$stale" ] || continue
  echo "kube-tools: removing $stale, left by a build that was killed" >&2
  rm -rf "$stale"
done
if [ -d "$dir" ]; then
  echo "kube-tools: $dir is a half-built cache (no .complete stamp, or a binary missing): removing it and building again" >&2
  rm -rf "$dir"
fi

version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$module/go.mod")
coredns_version=$(awk '$1 == "github.com/coredns/coredns" { print $2; exit }' "$root/tools/coredns/go.mod")
helm_version=$(awk '$1 == "helm.sh/helm/v3" { print $2; exit }' "$root/tools/release/go.mod")
actionlint_version=$(awk '$1 == "github.com/rhysd/actionlint" { print $2; exit }' "$root/tools/release/go.mod")
echo "kube-tools: building kube-apiserver and kube-controller-manager $version, etcd, CoreDNS $coredns_version, Helm $helm_version and actionlint $actionlint_version with $(go env GOVERSION) into $dir (once per pin; a cold build takes minutes)" >&2
for m in "${modules[@]}"; do
  if ! (cd "$root/tools/$m" && go mod download) >"$cache/download.log" 2>&1; then
    cat "$cache/download.log" >&2
    fail "downloading the modules of tools/$m failed (above). The Go module proxy ($(go env GOPROXY)) must be reachable, or the modules already in $(go env GOMODCACHE)."
  fi
done
tmp="$dir.tmp.$$"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
# A build cache of its own, removed with the build: the binaries are the
# cache, and Go's objects for them would hold ~4 GB of disk for nothing.
export GOCACHE="$tmp/go-build"
start=$(date +%s)
# The version the binaries report (/version, --version), as Kubernetes' own
# build stamps it (hack/lib/version.sh); without it they say v0.0.0-master.
minor=$(echo "$version" | cut -d. -f2)
stamp="-X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1"
stamp="$stamp -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
for t in "${tools[@]}"; do
  flags="-s"
  [ "${module_of[$t]}" = kube ] && flags="-s $stamp"
  # The versions they report, as their own release builds stamp them.
  # Helm's Makefile also stamps the Kubernetes version it assumes without a
  # cluster (helm template, helm lint): its client-go's minor (v0.N -> 1.N).
  if [ "$t" = helm ]; then
    k8s_minor=$(cd "$root/tools/release" && go list -f '{{.Version}}' -m k8s.io/client-go | cut -d. -f2)
    flags="-s -X helm.sh/helm/v3/internal/version.version=$helm_version"
    for pkg in pkg/lint/rules pkg/chartutil; do
      flags="$flags -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$k8s_minor"
    done
  fi
  [ "$t" = actionlint ] && flags="-s -X github.com/rhysd/actionlint.version=${actionlint_version#v}"
  (cd "$root/tools/${module_of[$t]}" && CGO_ENABLED=0 go build -trimpath -ldflags="$flags" -o "$tmp/$t" "${package[$t]}") ||
    fail "building $t failed (above); nothing was cached"
done
"$tmp/kube-apiserver" --version >"$tmp/version" || fail "the built kube-apiserver does not run"
# Whole output to a file first: `| head -1` would end etcd with SIGPIPE,
# which pipefail takes for a failure.
"$tmp/etcd" --version >"$tmp/etcd-version" || fail "the built etcd does not run"
sed -i 1q "$tmp/etcd-version"
"$tmp/coredns" -version >"$tmp/coredns-version" || fail "the built coredns does not run"
"$tmp/helm" version --short >"$tmp/helm-version" || fail "the built helm does not run"
"$tmp/actionlint" -version >"$tmp/actionlint-version" || fail "the built actionlint does not run"
echo "$(( $(date +%s) - start ))" >"$tmp/build-seconds"
rm -rf "$GOCACHE"
touch "$tmp/.complete"
mv "$tmp" "$dir"
trap - EXIT
echo "kube-tools: built $(cat "$dir/version") in $(cat "$dir/build-seconds") s" >&2
echo "$dir"
