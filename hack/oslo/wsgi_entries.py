"""Checks that every WSGI entry point kstack's rendered files name exists in the 2025.1 projects.

Run by hack/wsgi-check.sh with the Python of the venv that holds the pinned 2025.1 projects
(hack/oslo/requirements.txt), which stands for the Kolla image's venv /var/lib/kolla/venv:

* Apache vhosts: `WSGIScriptAlias / PATH`. A PATH under the image venv's `bin/` must be a script
  the pinned wheels install there (`keystone-wsgi-public`, `heat-wsgi-api`); one under the
  venv's `lib/python3/site-packages/` (Kolla links `lib/python3` to the distribution's Python)
  must be a module file of a pinned project.
* uWSGI ini files: `module = package.module:callable` must be a module file of a pinned project
  that assigns `callable`.

Projects not in the pinned set (horizon) are reported as skipped, never as passing. Exit status:
0 every entry point found, 1 one is missing, 2 nothing to check or bad usage.
"""

import os
import re
import sys
import sysconfig

IMAGE_BIN = "/var/lib/kolla/venv/bin/"
IMAGE_SITE = "/var/lib/kolla/venv/lib/python3/site-packages/"


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print("usage: wsgi_entries.py DIR", file=sys.stderr)
        return 2
    root = sys.argv[1]
    venv_bin = os.path.dirname(sys.executable)
    site = sysconfig.get_paths()["purelib"]
    checked, failed, skipped = 0, 0, 0

    def module_file(dotted):
        base = os.path.join(site, *dotted.split("."))
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
        return None

    def installed(top):
        return os.path.isdir(os.path.join(site, top))

    for dirpath, _, names in sorted(os.walk(root)):
        for name in sorted(names):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            try:
                text = open(path, encoding="utf-8").read()
            except (UnicodeDecodeError, OSError):
                continue
            for m in re.finditer(r"^\s*WSGIScriptAlias\s+/\s+\"?([^\s\"]+)", text, re.M):
                target = m.group(1)
                if target.startswith(IMAGE_BIN):
                    script = target[len(IMAGE_BIN):]
                    ok = os.path.isfile(os.path.join(venv_bin, script))
                    what = f"script {script}"
                elif target.startswith(IMAGE_SITE):
                    inner = target[len(IMAGE_SITE):]
                    if not installed(inner.split("/")[0]):
                        print(f"skip {rel}: {inner.split('/')[0]} is not in the pinned 2025.1 set")
                        skipped += 1
                        continue
                    ok = os.path.isfile(os.path.join(site, inner))
                    what = f"module file {inner}"
                else:
                    print(f"FAIL {rel}: WSGIScriptAlias {target} is outside the image venv")
                    failed += 1
                    continue
                checked += 1
                if ok:
                    print(f"ok   {rel}: {what}")
                else:
                    print(f"FAIL {rel}: {what} is not in the 2025.1 projects")
                    failed += 1
            if name.endswith(".ini"):
                for m in re.finditer(r"^\s*module\s*=\s*([\w.]+):(\w+)\s*$", text, re.M):
                    dotted, attr = m.group(1), m.group(2)
                    checked += 1
                    f = module_file(dotted)
                    if f is None:
                        print(f"FAIL {rel}: uWSGI module {dotted} is not in the 2025.1 projects")
                        failed += 1
                    elif not re.search(rf"^{attr}\s*=", open(f, encoding="utf-8").read(), re.M):
                        print(f"FAIL {rel}: {dotted} defines no `{attr}`")
                        failed += 1
                    else:
                        print(f"ok   {rel}: uWSGI module {dotted}:{attr}")
    if checked == 0:
        print(f"wsgi-check: no WSGI entry point under {root}", file=sys.stderr)
        return 2
    print(f"{checked - failed} of {checked} WSGI entry points found ({skipped} skipped)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
