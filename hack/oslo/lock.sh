#!/usr/bin/env bash
# Regenerates hack/oslo/requirements.txt from hack/oslo/projects.txt: the projects at their pinned
# versions, every library resolved as of the 2025.1 release date, so the venv sees the option set
# of 2025.1 (the Kolla 2025.1 images install the same library versions). Needs network access to
# PyPI; uses uv (installed into a throwaway venv) for its --exclude-newer resolution.
set -euo pipefail
cd "$(dirname "$0")"
RELEASE_DATE=2025-04-03
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/uv"
"$tmp/uv/bin/pip" install -q uv
args=()
while read -r req; do
  case $req in ''|'#'*) continue ;; esac
  # The project releases themselves come after the release date (stable point releases).
  args+=(--exclude-newer-package "${req%%==*}=$(date -u +%F)")
done < projects.txt
"$tmp/uv/bin/uv" pip compile -q --no-header --no-annotate --python-version 3.11 \
  --python-platform x86_64-unknown-linux-gnu --exclude-newer "$RELEASE_DATE" "${args[@]}" \
  projects.txt -o "$tmp/lock.txt"
{
  sed -n '1,5p' requirements.txt
  grep -v '^#' "$tmp/lock.txt"
} > requirements.txt.new
mv requirements.txt.new requirements.txt
echo "hack/oslo/requirements.txt: $(grep -c '==' requirements.txt) pins" >&2
