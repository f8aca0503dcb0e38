#!/usr/bin/env bash
# Installs from Debian's packages what the real node and the image build need, when missing:
# containerd, runc, the CNI plugins, iptables, iproute2, gcc (the pause image), debootstrap and
# docker.io (the image build), curl, openssl, python3, and Ceph's monitor, OSD and client (the
# dev machine's Ceph cluster for Cinder, hack/ceph.sh), ping (tempest pings guests' floating IPs
# from this machine) and python3's venv (tempest's venv). Needs root; prints what it installs.
set -euo pipefail

declare -A pkg_of=(
  [containerd]=containerd [runc]=runc [iptables]=iptables [ip]=iproute2 [gcc]=gcc
  [debootstrap]=debootstrap [dockerd]=docker.io [curl]=curl [openssl]=openssl [python3]=python3
  [conntrack]=conntrack [socat]=socat [ping]=iputils-ping
  [ceph-mon]=ceph-mon [ceph-osd]=ceph-osd [ceph]=ceph-common
)
need=()
for cmd in "${!pkg_of[@]}"; do command -v "$cmd" >/dev/null 2>&1 || need+=("${pkg_of[$cmd]}"); done
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
[ -f /usr/include/stdio.h ] || need+=(libc6-dev)
python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
[ "$(id -u)" = 0 ] || { echo "kstack: missing packages ${need[*]}; install them as root: apt-get install ${need[*]}" >&2; exit 1; }
echo "kstack: installing ${need[*]} from Debian's packages" >&2
apt-get update -qq
# policy-rc.d keeps the packages from starting their own daemons: kstack starts its own.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
