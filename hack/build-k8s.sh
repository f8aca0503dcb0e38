#!/usr/bin/env bash
# Builds the local control plane's binaries from the Go module proxy into a cache:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, and the
#   real node's kubelet, kube-proxy and CoreDNS (the cluster DNS).
# Each binary is built once per pinned version and reused; a binary is only
# moved into the cache after it built and answered --version, so an interrupted
# build never leaves a half-built cache behind.
set -euo pipefail

K8S_VERSION=${KSTACK_K8S_VERSION:-1.36.3}
ETCD_VERSION=${KSTACK_ETCD_VERSION:-3.6.16}
KWOK_VERSION=${KSTACK_KWOK_VERSION:-0.8.0}
COREDNS_VERSION=${KSTACK_COREDNS_VERSION:-1.14.7}
CACHE=${KSTACK_CACHE_DIR:-$HOME/.cache/kstack}
OUT="$CACHE/bin/k8s-v$K8S_VERSION-etcd-v$ETCD_VERSION-kwok-v$KWOK_VERSION-coredns-v$COREDNS_VERSION"

die() { echo "kstack dev: $*" >&2; exit 1; }

# runs() proves a binary works: every binary answers --version, kubectl answers "version --client".
runs() { [ "$(head -c4 "$1" 2>/dev/null | tr -d '\0')" = $'\x7fELF' ] || return 1
  case "$(basename "$1")" in
    kubectl) "$1" version --client >/dev/null 2>&1;;
    coredns) "$1" -version >/dev/null 2>&1;;
    *) "$1" --version >/dev/null 2>&1;;
  esac; }
have() { [ -x "$OUT/$1" ] && runs "$OUT/$1"; }
# One build at a time: a second caller (the main job starts this build at once, beside the Rust
# and image builds, and `kstack dev up` asks again) waits for the first and finds its result.
mkdir -p "$CACHE/bin"
exec 9>"$CACHE/bin/.build.lock"
flock 9
want=()
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kubelet kube-proxy coredns; do have "$b" || want+=("$b"); done
[ -f "$OUT/kwok-stages/pod/fast/pod-ready.yaml" ] || want+=(kwok-stages)
if [ ${#want[@]} -eq 0 ]; then echo "$OUT"; exit 0; fi
command -v go >/dev/null 2>&1 || die "${want[*]} missing or broken in $OUT and the Go toolchain is missing to build them: install Go >= 1.26 (https://go.dev/doc/install) and put 'go' on PATH"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
GOVER=$(go env GOVERSION | sed 's/^go//')
case "$GOVER" in 1.2[6-9]*|1.[3-9]*) ;; *) die "Go $GOVER is too old: Kubernetes v$K8S_VERSION and kwok v$KWOK_VERSION need Go >= 1.26";; esac
echo "kstack dev: building ${want[*]} into $OUT (first run only; this takes a while)" >&2

mkdir -p "$OUT"
STAGE=$(mktemp -d "$CACHE/build.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT

# No pipeline here: under pipefail, `printf | grep -q` can fail when grep exits first (SIGPIPE).
need() { local w; for w in "${want[@]}"; do [ "$w" = "$1" ] && return 0; done; return 1; }

if need kube-apiserver || need kube-controller-manager || need kube-scheduler || need kubectl || need kubelet || need kube-proxy; then
  W="$STAGE/src/k8s"; mkdir -p "$W"; cd "$W"
  go mod init local.kstack/k8sbin >/dev/null 2>&1
  GOMOD=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  [ -f "$GOMOD" ] || die "could not download k8s.io/kubernetes@v$K8S_VERSION from the Go module proxy"
  for m in $(sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\)[[:space:]]*=>[[:space:]]*\./staging/.*#\1#p' "$GOMOD"); do
    go mod edit -replace="$m=$m@v0.${K8S_VERSION#1.}"
  done
  go get "k8s.io/kubernetes@v$K8S_VERSION" >/dev/null
  MINOR=${K8S_VERSION#1.}; MINOR=${MINOR%%.*}
  LD="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    LD="$LD -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$MINOR -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  pkgs=()
  for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy; do need "$b" && pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  need kubectl && pkgs+=("k8s.io/kubernetes/cmd/kubectl")
  go build -trimpath -pgo=off -ldflags "$LD" -o "$STAGE/" "${pkgs[@]}"
fi

if need etcd; then
  W="$STAGE/src/etcd"; mkdir -p "$W"; cd "$W"
  go mod init local.kstack/etcdbin >/dev/null 2>&1
  go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >/dev/null
  go build -trimpath -ldflags "-s -w" -o "$STAGE/etcd" go.etcd.io/etcd/server/v3
fi

if need kwok; then
  GOBIN="$STAGE" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
fi

if need coredns; then
  GOBIN="$STAGE" go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@v$COREDNS_VERSION"
fi

if need kwok-stages; then # kwok's stage definitions, so starting a cluster needs no Go toolchain
  go mod download "sigs.k8s.io/kwok@v$KWOK_VERSION" >/dev/null
  SRC=$(go env GOMODCACHE)/sigs.k8s.io/kwok@v$KWOK_VERSION/kustomize/stage
  rm -rf "$OUT/kwok-stages" && cp -r "$SRC" "$STAGE/kwok-stages" && chmod -R u+w "$STAGE/kwok-stages" && mv "$STAGE/kwok-stages" "$OUT/kwok-stages"
  want=("${want[@]/kwok-stages}")
fi

for b in "${want[@]}"; do
  [ -n "$b" ] || continue
  [ -x "$STAGE/$b" ] || die "the build did not produce $b (see the go output above)"
  runs "$STAGE/$b" || die "built $b does not run: $("$STAGE/$b" --version 2>&1 | tail -1)"
  mv -f "$STAGE/$b" "$OUT/$b"
done
echo "$OUT"
