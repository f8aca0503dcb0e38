"""Registers a service in Keystone: the service, its internal and public endpoints, the roles
it needs and, when it has one, its user in project `service` with roles admin and service.
Rendered by kstack; run by a bootstrap Job as the admin whose credentials are in ADMIN.json.
Keystone's v3 API over Python's standard library only: the Job pays one interpreter start and
one token, not the import of a client library (about 0.4 s of CPU for openstacksdk on an idle
core, paid by every registration of a deploy at once), and makes few calls: every call waits
its turn at Keystone.

No password reaches the output: an error shows Keystone's answer with the passwords this run
knows masked.

Safe to run again, and beside the registrations of other services: project `service`, which
they share, is made by one of them only (SPEC's `service_project` is `create` there, `wait` in
the others), so Keystone never sees two creates of it and logs no conflict. A create that
conflicts all the same (a project deleted by hand, then two Jobs) finds what the other Job made.

    python3 register.py SPEC.json ADMIN.json   (the user's password, if any, in SPEC's password_file)
"""

import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

WAIT_FOR_PROJECT = 300
TIMEOUT = 30


# The passwords of this run (the admin's, the service user's), masked in what is printed.
SECRETS = []


def log(msg):
    print(f"register: {msg}", flush=True)


def fail(msg):
    for secret in SECRETS:
        msg = msg.replace(secret, "***")
    sys.exit(f"register: {msg}")


class Conflict(Exception):
    pass


class Keystone:
    """The admin's session: one token, then plain JSON calls."""

    def __init__(self, admin):
        self.base = admin["auth_url"].rstrip("/")
        if not self.base.endswith("/v3"):
            self.base += "/v3"
        body = {"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": admin["username"],
                "domain": {"name": admin["user_domain_name"]},
                "password": admin["password"],
            }}},
            "scope": {"project": {
                "name": admin["project_name"],
                "domain": {"name": admin["project_domain_name"]},
            }},
        }}
        self.token = None
        _, headers = self._call("POST", "/auth/tokens", body)
        self.token = headers.get("X-Subject-Token")
        if not self.token:
            fail("Keystone answered the login without a token")

    def _call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("X-Auth-Token", self.token)
        # Keystone may still be settling (a pod just ready, a restart): retry what did not
        # reach it or what it answered 5xx, for about a minute.
        for attempt in range(12):
            try:
                with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
                    raw = resp.read()
                    return (json.loads(raw) if raw else None), resp.headers
            except urllib.error.HTTPError as e:
                if e.code == 409:
                    raise Conflict(path) from None
                if e.code < 500 or attempt == 11:
                    detail = e.read().decode(errors="replace")[:300]
                    fail(f"{method} {path}: HTTP {e.code}: {detail}")
                why = f"HTTP {e.code}"
            except (urllib.error.URLError, OSError) as e:
                if attempt == 11:
                    fail(f"{method} {path}: {e}")
                why = str(e)
            log(f"{method} {path}: {why}; trying again")
            time.sleep(min(1 + attempt, 5))

    def get(self, path, **query):
        q = urllib.parse.urlencode(query)
        return self._call("GET", f"{path}?{q}" if q else path)[0]

    def post(self, path, body):
        return self._call("POST", path, body)[0]

    def patch(self, path, body):
        return self._call("PATCH", path, body)[0]

    def put(self, path):
        return self._call("PUT", path)[0]


def ensure(what, find, create):
    """find(), else create(); a conflict (another Job created it first) is found again."""
    for attempt in range(10):
        found = find()
        if found is not None:
            return found
        try:
            made = create()
            log(f"created {what}")
            return made
        except Conflict:
            time.sleep(0.5 * (attempt + 1))
    found = find()
    if found is None:
        fail(f"{what}: created elsewhere but not found")
    return found


def first(items, **match):
    return next((i for i in items if all(i.get(k) == v for k, v in match.items())), None)


def find_project(ks):
    return first(ks.get("/projects", name="service", domain_id="default")["projects"],
                 name="service")


def service_project(ks, mode):
    """Project `service`: made here when `mode` is `create`; with `wait`, another
    registration of this deploy makes it, so wait for it, and make it after WAIT_FOR_PROJECT
    seconds (that registration did not run, e.g. the project was deleted by hand)."""
    if mode == "wait":
        deadline = time.monotonic() + WAIT_FOR_PROJECT
        waited = False
        while time.monotonic() < deadline:
            found = find_project(ks)
            if found is not None:
                if waited:
                    log("project service exists")
                return found
            if not waited:
                log("waiting for project service (another registration makes it)")
                waited = True
            time.sleep(1)
        log(f"no project service after {WAIT_FOR_PROJECT} s; making it here")
    return ensure("project service", lambda: find_project(ks),
                  lambda: ks.post("/projects", {"project": {
                      "name": "service", "domain_id": "default", "enabled": True}})["project"])


def role(ks, name):
    return ensure(f"role {name}",
                  lambda: first(ks.get("/roles", name=name)["roles"], name=name),
                  lambda: ks.post("/roles", {"role": {"name": name}})["role"])


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    with open(sys.argv[2], encoding="utf-8") as f:
        admin = json.load(f)
    SECRETS.append(admin["password"])
    password = None
    if spec.get("password_file"):
        with open(spec["password_file"], encoding="utf-8") as f:
            password = f.read()
        SECRETS.append(password)
    ks = Keystone(admin)
    name, stype, region = spec["name"], spec["type"], spec["region"]

    service = ensure(
        f"service {name} ({stype})",
        lambda: first(ks.get("/services", type=stype)["services"], name=name),
        lambda: ks.post("/services", {"service": {
            "name": name, "type": stype, "enabled": True}})["service"],
    )
    # Every call waits its turn among the registrations that run at once: one listing of the
    # service's endpoints, and of the roles, serves every check after it.
    existing = [e for e in ks.get("/endpoints", service_id=service["id"])["endpoints"]
                if e["service_id"] == service["id"] and e.get("region_id") == region]
    roles = {r["name"]: r for r in ks.get("/roles")["roles"]}
    for ep in spec["endpoints"]:
        iface, url = ep["interface"], ep["url"]
        found = [e for e in existing if e["interface"] == iface]
        if not found:
            ks.post("/endpoints", {"endpoint": {"service_id": service["id"], "interface": iface,
                                                "url": url, "region_id": region}})
            log(f"created the {iface} endpoint {url}")
        elif found[0]["url"] != url:
            ks.patch(f"/endpoints/{found[0]['id']}", {"endpoint": {"url": url}})
            log(f"set the {iface} endpoint to {url}")
    for r in spec.get("roles", []):
        roles[r] = roles.get(r) or role(ks, r)

    if password is not None:
        project = service_project(ks, spec.get("service_project", "create"))
        find_user = lambda: first(ks.get("/users", name=name, domain_id="default")["users"],
                                  name=name)
        user = find_user()
        if user is None:
            make = lambda: ks.post("/users", {"user": {
                "name": name, "password": password, "domain_id": "default",
                "default_project_id": project["id"], "enabled": True}})["user"]
            try:
                user = make()
                log(f"created user {name}")
            except Conflict:
                user = ensure(f"user {name}", find_user, make)
        else:
            ks.patch(f"/users/{user['id']}", {"user": {"password": password}})
        for role_name in ("admin", "service"):
            r = roles.get(role_name) or role(ks, role_name)
            ks.put(f"/projects/{project['id']}/users/{user['id']}/roles/{r['id']}")
        log(f"user {name} has roles admin and service in project service")
    log(f"{name} ({stype}) registered")


if __name__ == "__main__":
    main()
