#!/usr/bin/env python3
# Rotates the Fernet keys of a Keystone key repository held in a Kubernetes Secret.
#
# Run by the <repository>-rotate CronJob that kstack renders. Every replica of keystone mounts
# the Secret read-only; the kubelet swaps the files in place, so every replica reads the same
# keys. A rotation is due once the Secret's kstack.io/rotated-at annotation (set by kstack
# when it created the keys, then by each rotation) is at least KSTACK_ROTATION_INTERVAL
# seconds old. The time recorded is the minute the run started in (the schedule's grid), so a
# run that starts a few seconds late neither skips a rotation nor shifts the next one; the
# schedule only says how often to check.
#
# keystone-manage fernet_rotate does the rotation on a private copy: the staged key 0 becomes
# the primary, a new staged key is made, and the oldest keys beyond max_active_keys go. The
# Secret is then patched with the resourceVersion it was read at, so two rotations can never
# both apply. No key is ever printed.
import base64
import datetime
import json
import os
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

ANNOTATION = "kstack.io/rotated-at"
CREDENTIALS = os.environ.get("KSTACK_API_CREDENTIALS", "/var/run/secrets/kstack")


def fail(message):
    print("fernet-rotate: " + message, file=sys.stderr)
    sys.exit(1)


def api(method, path, body=None, content_type="application/json"):
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        fail("KUBERNETES_SERVICE_HOST is not set: not running in a Kubernetes pod?")
    if ":" in host:
        host = "[" + host + "]"
    with open(os.path.join(CREDENTIALS, "token")) as f:
        token = f.read().strip()
    context = ssl.create_default_context(cafile=os.path.join(CREDENTIALS, "ca.crt"))
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        "https://%s:%s%s" % (host, port, path), data=data, method=method
    )
    request.add_header("Authorization", "Bearer " + token)
    request.add_header("Accept", "application/json")
    if body is not None:
        request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return json.load(response)
    except urllib.error.HTTPError as e:
        if e.code == 409:
            fail("%s changed while it was rotated; the next run rotates it" % path)
        fail("%s %s answered %d %s" % (method, path, e.code, e.reason))
    except (urllib.error.URLError, OSError) as e:
        fail("cannot reach the Kubernetes API at %s:%s: %s" % (host, port, e))


def parse_time(value):
    return datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc
    )


def main():
    namespace = os.environ["KSTACK_NAMESPACE"]
    name = os.environ["KSTACK_KEY_SECRET"]
    interval = int(os.environ["KSTACK_ROTATION_INTERVAL"])
    max_keys = int(os.environ["KSTACK_MAX_ACTIVE_KEYS"])
    path = "/api/v1/namespaces/%s/secrets/%s" % (namespace, name)

    secret = api("GET", path)
    metadata = secret["metadata"]
    now = datetime.datetime.now(datetime.timezone.utc)
    minute = now.replace(second=0, microsecond=0)
    last = (metadata.get("annotations") or {}).get(ANNOTATION)
    if last:
        try:
            age = (now - parse_time(last)).total_seconds()
        except ValueError:
            fail("%s: annotation %s is not a UTC time (%r)" % (name, ANNOTATION, last))
        if age < interval:
            print(
                "%s: rotated %d s ago; due in %d s" % (name, age, interval - age),
                flush=True,
            )
            return
    keys = secret.get("data") or {}
    if not keys or not all(k.isdigit() for k in keys):
        fail("%s holds no Fernet key repository (keys 0, 1, ...); kstack deploy creates it" % name)

    with tempfile.TemporaryDirectory() as work:
        repo = os.path.join(work, "keys")
        os.mkdir(repo, 0o700)
        for k, v in keys.items():
            fd = os.open(os.path.join(repo, k), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(base64.b64decode(v))
        conf = os.path.join(work, "rotate.conf")
        with open(conf, "w") as f:
            f.write(
                "[fernet_tokens]\nkey_repository = %s\nmax_active_keys = %d\n"
                % (repo, max_keys)
            )
        done = subprocess.run(
            ["keystone-manage", "--config-file", conf, "fernet_rotate"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if done.returncode != 0:
            # keystone-manage logs file names and key ids, never key material.
            fail("keystone-manage fernet_rotate failed:\n" + done.stdout)
        rotated = {}
        for k in os.listdir(repo):
            with open(os.path.join(repo, k), "rb") as f:
                rotated[k] = base64.b64encode(f.read()).decode()

    data = dict(rotated)
    for k in keys:
        if k not in rotated:
            data[k] = None  # a merge patch removes it
    patch = {
        "metadata": {
            "resourceVersion": metadata["resourceVersion"],
            "annotations": {ANNOTATION: minute.strftime("%Y-%m-%dT%H:%M:%SZ")},
        },
        "data": data,
    }
    api("PATCH", path, patch, "application/merge-patch+json")
    before = sorted(int(k) for k in keys)
    after = sorted(int(k) for k in rotated)
    print(
        "%s: rotated; keys %s -> %s, primary key %d"
        % (name, before, after, after[-1]),
        flush=True,
    )


if __name__ == "__main__":
    main()
