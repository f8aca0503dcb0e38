#!/usr/bin/env bash
# Regenerates the Python pins of kstack's images for Python 3.11 on x86_64 Linux (Debian
# bookworm's interpreter):
#
#   hack/images/lock.sh            2025.1: releases/2025.1/requirements.txt (the service venv
#                                  /var/lib/kolla/venv) and toolbox-requirements.txt
#                                  (kolla-toolbox's /opt/ansible, shared by every release)
#   hack/images/lock.sh 2024.2     releases/2024.2/requirements.txt
#
# 2025.1: the projects and every library hack/oslo/requirements.txt pins keep exactly those
# versions, so the images run what kstack's config validation checked; everything else takes its
# 2025.1 upper-constraints pin. Another release: the projects of releases/<release>/projects.txt,
# everything else pinned by that release's upper-constraints (KSTACK_UPPER_CONSTRAINTS, e.g.
# `git show 2024.2-eol:upper-constraints.txt` in openstack/requirements).
# Needs PyPI; uses uv in a throwaway venv.
set -euo pipefail
cd "$(dirname "$0")"
release=${1:-2025.1}
case $release in
  2025.1) UC=${KSTACK_UPPER_CONSTRAINTS:-../../../shared/reference/openstack-2025.1/upper-constraints.txt} ;;
  *) [ -f "releases/$release/projects.txt" ] || { echo "lock.sh: no releases/$release/projects.txt" >&2; exit 2; }
     UC=${KSTACK_UPPER_CONSTRAINTS:?set KSTACK_UPPER_CONSTRAINTS to the upper-constraints.txt of $release} ;;
esac
[ -f "$UC" ] || { echo "lock.sh: upper-constraints not found at $UC (set KSTACK_UPPER_CONSTRAINTS)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/uv"
"$tmp/uv/bin/pip" install -q uv
# Constraints: for 2025.1 hack/oslo's pins win; upper-constraints fills in the rest.
oslo_pins=../oslo/requirements.txt
[ "$release" = 2025.1 ] || oslo_pins=/dev/null
python3 - "$UC" "$oslo_pins" > "$tmp/constraints.txt" <<'PY'
import re, sys
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
oslo = {}
for line in open(sys.argv[2]):
    line = line.strip()
    if line and not line.startswith("#"):
        oslo[norm(line.split("==")[0])] = line
print("\n".join(sorted(oslo.values())))
for line in open(sys.argv[1]):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    name = re.split(r"[=<>!;\[ ]", line, maxsplit=1)[0]
    if norm(name) not in oslo:
        print(line.replace("===", "=="))
PY
# Some sdists (XStatic-*) import pkg_resources in setup.py: build them with a setuptools that
# still has it, the one the 2025.1 lock pins.
grep -i '^setuptools==' ../oslo/requirements.txt > "$tmp/build-constraints.txt"
lock() {
  "$tmp/uv/bin/uv" pip compile -q --no-header --no-annotate --python-version 3.11 \
    --python-platform x86_64-unknown-linux-gnu -c "$tmp/constraints.txt" \
    --build-constraints "$tmp/build-constraints.txt" "$@" -o "$tmp/out.txt"
  # ovs (the Python OVSDB library) is PyPI's, as pinned: Debian's python3-openvswitch 3.1 is
  # too old for ovsdbapp 2.11 (the agent's OVSDB connection fails `assert not self.txn`).
  grep -v -e '^#' "$tmp/out.txt"
}
if [ "$release" != 2025.1 ]; then
  # extra.txt's horizon pin is 2025.1's: the release's own is in its projects.txt.
  grep -iv '^horizon==' extra.txt > "$tmp/extra.txt"
  {
    echo "# The service venv of kstack's $release images (/var/lib/kolla/venv): projects.txt here plus"
    echo "# hack/images/extra.txt, pinned by the $release upper-constraints."
    echo "# Regenerate with hack/images/lock.sh $release."
    lock "releases/$release/projects.txt" "$tmp/extra.txt"
  } > "releases/$release/requirements.txt"
  echo "hack/images/releases/$release: $(grep -c '==' "releases/$release/requirements.txt") service pins" >&2
  exit 0
fi
{
  echo "# The service venv of kstack's images (/var/lib/kolla/venv): hack/oslo/projects.txt plus"
  echo "# hack/images/extra.txt, pinned by hack/oslo/requirements.txt and the 2025.1 upper-constraints."
  echo "# Regenerate with hack/images/lock.sh."
  lock ../oslo/projects.txt extra.txt
} > releases/2025.1/requirements.txt
{
  echo "# kolla-toolbox's /opt/ansible venv: hack/images/toolbox.txt, same constraints."
  echo "# Regenerate with hack/images/lock.sh."
  lock toolbox.txt
} > toolbox-requirements.txt
echo "hack/images: $(grep -c '==' releases/2025.1/requirements.txt) service pins, $(grep -c '==' toolbox-requirements.txt) toolbox pins" >&2
