#!/usr/bin/env python3
"""Creates (and deletes) images through glance from several clients at once, and counts the
answers by HTTP status: what docs/PERFORMANCE.md measures of a Galera cluster's reads.

    OS_PASSWORD=<keystone_admin_password> python3 hack/image-create-load.py \\
        http://<keystone cluster IP>:5000 http://<glance-api cluster IP>:9292 8 50

Arguments: keystone URL, glance URL, clients, creates per client. Prints the counts, e.g.
{201: 399, 500: 1}. Needs `requests`. The password is read from the environment only.
"""
import collections
import os
import sys
import threading

import requests


def main():
    keystone, glance, clients, per = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    auth = {"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"id": "default"}, "password": os.environ["OS_PASSWORD"]}}},
        "scope": {"project": {"name": "admin", "domain": {"id": "default"}}}}}
    r = requests.post(keystone + "/v3/auth/tokens", json=auth, timeout=60)
    r.raise_for_status()
    token = r.headers["X-Subject-Token"]
    codes = collections.Counter()
    lock = threading.Lock()

    def client():
        s = requests.Session()
        s.headers["X-Auth-Token"] = token
        for _ in range(per):
            r = s.post(glance + "/v2/images", timeout=60, json={
                "name": "kstack-load", "disk_format": "raw", "container_format": "bare"})
            with lock:
                codes[r.status_code] += 1
            if r.status_code == 201:
                s.delete(glance + "/v2/images/" + r.json()["id"], timeout=60)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(dict(sorted(codes.items())))


if __name__ == "__main__":
    main()
