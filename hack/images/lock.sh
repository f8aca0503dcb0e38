#!/usr/bin/env bash
# Regenerates hack/images/requirements.txt (the service venv /var/lib/kolla/venv) and
# hack/images/toolbox-requirements.txt (kolla-toolbox's /opt/ansible) for Python 3.11 on x86_64
# Linux (Debian bookworm's interpreter). The projects and every library hack/oslo/requirements.txt
# pins keep exactly those versions, so the images run what kstack's config validation checked;
# everything else takes its 2025.1 upper-constraints pin. Needs PyPI; uses uv in a throwaway venv.
set -euo pipefail
cd "$(dirname "$0")"
UC=${KSTACK_UPPER_CONSTRAINTS:-../../../shared/reference/openstack-2025.1/upper-constraints.txt}
[ -f "$UC" ] || { echo "lock.sh: upper-constraints not found at $UC (set KSTACK_UPPER_CONSTRAINTS)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/uv"
"$tmp/uv/bin/pip" install -q uv
# Constraints: hack/oslo's pins win; upper-constraints fills in the rest.
python3 - "$UC" ../oslo/requirements.txt > "$tmp/constraints.txt" <<'PY'
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
# still has it, the one the lock pins.
grep -i '^setuptools==' ../oslo/requirements.txt > "$tmp/build-constraints.txt"
lock() {
  "$tmp/uv/bin/uv" pip compile -q --no-header --no-annotate --python-version 3.11 \
    --python-platform x86_64-unknown-linux-gnu -c "$tmp/constraints.txt" \
    --build-constraints "$tmp/build-constraints.txt" "$@" -o "$tmp/out.txt"
  # ovs (the Python OVSDB library) is PyPI's, as pinned: Debian's python3-openvswitch 3.1 is
  # too old for ovsdbapp 2.11 (the agent's OVSDB connection fails `assert not self.txn`).
  grep -v -e '^#' "$tmp/out.txt"
}
{
  echo "# The service venv of kstack's images (/var/lib/kolla/venv): hack/oslo/projects.txt plus"
  echo "# hack/images/extra.txt, pinned by hack/oslo/requirements.txt and the 2025.1 upper-constraints."
  echo "# Regenerate with hack/images/lock.sh."
  lock ../oslo/projects.txt extra.txt
} > requirements.txt
{
  echo "# kolla-toolbox's /opt/ansible venv: hack/images/toolbox.txt, same constraints."
  echo "# Regenerate with hack/images/lock.sh."
  lock toolbox.txt
} > toolbox-requirements.txt
echo "hack/images: $(grep -c '==' requirements.txt) service pins, $(grep -c '==' toolbox-requirements.txt) toolbox pins" >&2
