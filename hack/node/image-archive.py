#!/usr/bin/env python3
"""Writes a one-layer image archive (the `docker save` layout, which `ctr images import` reads)
from a directory tree, with no container engine: the dev cluster's pause image.

    image-archive.py REF ROOTFS_DIR OUT.tar [ENTRYPOINT...]
"""
import hashlib
import io
import json
import os
import sys
import tarfile


def layer_tar(root: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(dirnames) + sorted(filenames):
                path = os.path.join(dirpath, name)
                info = tar.gettarinfo(path, arcname=os.path.relpath(path, root))
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                if info.isfile():
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return buf.getvalue()


def main() -> int:
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    ref, root, out, entrypoint = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    layer = layer_tar(root)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Entrypoint": entrypoint or None, "User": "65535:65535"},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [{"created_by": "kstack hack/node/image-archive.py"}],
        },
        sort_keys=True,
    ).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    layer_name = diff_id.split(":", 1)[1] + "/layer.tar"
    manifest = json.dumps(
        [{"Config": config_name, "RepoTags": [ref], "Layers": [layer_name]}]
    ).encode()
    with tarfile.open(out, "w") as tar:
        for name, data in [(config_name, config), (layer_name, layer), ("manifest.json", manifest)]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
