"""Resolve the cloud's cluster DNS names without touching /etc/hosts.

The catalog's endpoints are names like keystone.openstack.svc, which only the cluster's DNS
resolves. hack/tempest.sh has a hosts-format file (ClusterIP, names) written from the
namespace's Services and names it in KSTACK_TEMPEST_HOSTS; a .pth file in the tempest venv
imports this module in every Python process of the venv (tempest, its stestr workers, the
config generator), which then answers those names from the file and leaves every other name
to the system's resolver: what `kstack verify --resolve NAME=ADDR` does for its own client.
The file is read again when it changes (the generator writes it after its own start).
"""

import os
import socket

_PATH = os.environ.get("KSTACK_TEMPEST_HOSTS")
_state = {"mtime": None, "table": {}}


def _table():
    try:
        mtime = os.stat(_PATH).st_mtime_ns
    except OSError:
        return {}
    if mtime != _state["mtime"]:
        table = {}
        try:
            with open(_PATH, encoding="utf-8") as f:
                for line in f:
                    fields = line.split("#", 1)[0].split()
                    for name in fields[1:]:
                        table[name.lower().rstrip(".")] = fields[0]
        except OSError:
            pass
        _state["mtime"], _state["table"] = mtime, table
    return _state["table"]


def _map(host):
    if isinstance(host, bytes):
        mapped = _table().get(host.decode("ascii", "replace").lower().rstrip("."))
        return mapped.encode() if mapped else host
    if isinstance(host, str):
        return _table().get(host.lower().rstrip("."), host)
    return host


if _PATH:
    _getaddrinfo = socket.getaddrinfo
    _gethostbyname = socket.gethostbyname

    def getaddrinfo(host, *args, **kwargs):
        return _getaddrinfo(_map(host), *args, **kwargs)

    def gethostbyname(host):
        return _gethostbyname(_map(host))

    socket.getaddrinfo = getaddrinfo
    socket.gethostbyname = gethostbyname
