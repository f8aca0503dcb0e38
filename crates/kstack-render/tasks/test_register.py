"""Tests of register.py against an in-process Keystone: the v3 calls it makes, kept in memory
with Keystone's answers (201 on create, 409 on a duplicate name, 404 on an unknown id, 401
without a token). Run by `cargo test -p kstack-render --test tasks_py`, or directly:

    python3 -m unittest test_register     (in crates/kstack-render/tasks)
"""

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import register  # noqa: E402

ADMIN_PASSWORD = "adm1n-$ecret"


class FakeKeystone:
    """Keystone's v3 API, the part register.py uses."""

    KINDS = {"services": "service", "endpoints": "endpoint", "roles": "role",
             "projects": "project", "users": "user"}

    def __init__(self):
        self.lock = threading.Lock()
        self.items = {k: {} for k in self.KINDS}
        self.assignments = set()
        self.calls = []
        self.fail_next = []  # HTTP statuses to answer the next calls with
        self.token = uuid.uuid4().hex
        admin = self.add("projects", {"name": "admin", "domain_id": "default"})
        # What `keystone-manage bootstrap` makes besides the admin.
        for role in ("admin", "manager", "member", "reader", "service"):
            self.add("roles", {"name": role})
        user = self.add("users", {"name": "admin", "domain_id": "default"})
        self.passwords = {user["id"]: ADMIN_PASSWORD}
        self.admin_project = admin["id"]

    def add(self, kind, obj):
        obj = dict(obj, id=uuid.uuid4().hex)
        self.items[kind][obj["id"]] = obj
        return obj

    def handle(self, method, path, query, headers, body):
        with self.lock:
            self.calls.append((method, path, dict(query)))
            if self.fail_next:
                return self.fail_next.pop(0), {}, {"error": {"message": "busy"}}
            if path == "/v3/auth/tokens" and method == "POST":
                pw = body["auth"]["identity"]["password"]["user"]
                user = next((u for u in self.items["users"].values()
                             if u["name"] == pw["name"]), None)
                if user is None or self.passwords.get(user["id"]) != pw["password"]:
                    return 401, {}, {"error": {"message": "The request you have made requires authentication."}}
                return 201, {"X-Subject-Token": self.token}, {"token": {}}
            if headers.get("X-Auth-Token") != self.token:
                return 401, {}, {"error": {"message": "no token"}}
            m = re.fullmatch(r"/v3/projects/(\w+)/users/(\w+)/roles/(\w+)", path)
            if m and method == "PUT":
                p, u, r = m.groups()
                if (p not in self.items["projects"] or u not in self.items["users"]
                        or r not in self.items["roles"]):
                    return 404, {}, {"error": {"message": "not found"}}
                self.assignments.add((p, u, r))
                return 204, {}, None
            m = re.fullmatch(r"/v3/(\w+)(?:/(\w+))?", path)
            if not m or m.group(1) not in self.KINDS:
                return 404, {}, {"error": {"message": f"no {path}"}}
            kind, oid = m.groups()
            one = self.KINDS[kind]
            store = self.items[kind]
            if method == "GET" and oid is None:
                found = [o for o in store.values()
                         if all(o.get(k) == v for k, v in query.items())]
                return 200, {}, {kind: found}
            if method == "POST" and oid is None:
                obj = body[one]
                if kind != "endpoints" and any(
                        o["name"] == obj["name"] and o.get("domain_id") == obj.get("domain_id")
                        and kind != "services" for o in store.values()):
                    return 409, {}, {"error": {"message": "Conflict"}}
                password = obj.pop("password", None)
                made = self.add(kind, obj)
                if password is not None:
                    self.passwords[made["id"]] = password
                return 201, {}, {one: made}
            if method == "PATCH" and oid in store:
                change = body[one]
                if "password" in change:
                    self.passwords[oid] = change.pop("password")
                store[oid].update(change)
                return 200, {}, {one: store[oid]}
            return 404, {}, {"error": {"message": "not found"}}


def serve(keystone):
    class Handler(BaseHTTPRequestHandler):
        def _do(self):
            url = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(url.query))
            n = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(n)) if n else None
            status, headers, answer = keystone.handle(
                self.command, url.path, query, self.headers, body)
            raw = b"" if answer is None else json.dumps(answer).encode()
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = do_PATCH = do_PUT = _do

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class RegisterTest(unittest.TestCase):
    def setUp(self):
        self.ks = FakeKeystone()
        self.server = serve(self.ks)
        self.addCleanup(self.server.server_close)
        self.addCleanup(self.server.shutdown)
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        port = self.server.server_address[1]
        self.admin = self.write("admin.json", json.dumps({
            "auth_url": f"http://127.0.0.1:{port}", "username": "admin",
            "password": ADMIN_PASSWORD, "project_name": "admin",
            "user_domain_name": "Default", "project_domain_name": "Default"}))
        self.pw = self.write("service-password", "gl@nce pw")

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def spec(self, name="glance", stype="image", url="http://glance-api:9292", **extra):
        spec = {"name": name, "type": stype, "region": "RegionOne", "roles": [],
                "endpoints": [{"interface": "internal", "url": url},
                              {"interface": "public", "url": url.replace("glance-api", "public")}]}
        spec.update(extra)
        return self.write(f"{name}.json", json.dumps(spec))

    def run_register(self, spec):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            sys.argv = ["register.py", spec, self.admin]
            register.main()
        return out.getvalue()

    def named(self, kind, name):
        return [o for o in self.ks.items[kind].values() if o["name"] == name]

    def test_registers_the_service_its_endpoints_roles_and_user(self):
        self.run_register(self.spec(roles=["reader"], password_file=self.pw,
                                    service_project="create"))
        (svc,) = self.named("services", "glance")
        self.assertEqual(svc["type"], "image")
        eps = {(e["interface"], e["url"], e["region_id"]) for e in self.ks.items["endpoints"].values()
               if e["service_id"] == svc["id"]}
        self.assertEqual(eps, {("internal", "http://glance-api:9292", "RegionOne"),
                               ("public", "http://public:9292", "RegionOne")})
        self.assertEqual(len(self.named("roles", "reader")), 1)
        self.assertEqual(len(self.named("roles", "admin")), 1)
        (project,) = self.named("projects", "service")
        (user,) = self.named("users", "glance")
        self.assertEqual(self.ks.passwords[user["id"]], "gl@nce pw")
        self.assertEqual(user["default_project_id"], project["id"])
        roles = {r["name"]: r["id"] for r in self.ks.items["roles"].values()}
        self.assertEqual({(project["id"], user["id"], roles["admin"]),
                          (project["id"], user["id"], roles["service"])},
                         {a for a in self.ks.assignments if a[1] == user["id"]})

    def test_a_fresh_registration_makes_few_calls(self):
        # Keystone serves the registrations of a deploy at once on a few workers: every call
        # waits its turn. One login, and a listing serves every check after it.
        self.run_register(self.spec(roles=["reader"], password_file=self.pw,
                                    service_project="create"))
        self.assertLessEqual(len(self.ks.calls), 13, "\n".join(map(str, self.ks.calls)))
        self.assertEqual(sum(1 for c in self.ks.calls if c[1] == "/v3/auth/tokens"), 1)

    def test_a_second_run_changes_only_what_differs(self):
        self.run_register(self.spec(password_file=self.pw, service_project="create"))
        before = {k: dict(v) for k, v in self.ks.items.items()}
        self.pw = self.write("service-password", "new pw")
        out = self.run_register(self.spec(url="http://glance-api:9393", password_file=self.pw,
                                          service_project="create"))
        for kind in ("services", "roles", "projects", "users"):
            self.assertEqual(self.ks.items[kind].keys(), before[kind].keys(), kind)
        self.assertEqual(len(self.ks.items["endpoints"]), 2)
        urls = sorted(e["url"] for e in self.ks.items["endpoints"].values())
        self.assertEqual(urls, ["http://glance-api:9393", "http://public:9393"])
        (user,) = self.named("users", "glance")
        self.assertEqual(self.ks.passwords[user["id"]], "new pw")
        self.assertIn("set the internal endpoint to http://glance-api:9393", out)
        self.assertNotIn("created", out)

    def test_a_waiting_registration_finds_the_project_another_one_makes(self):
        register.WAIT_FOR_PROJECT = 30
        spec = self.spec(password_file=self.pw, service_project="wait")
        timer = threading.Timer(1.5, lambda: self.ks.add(
            "projects", {"name": "service", "domain_id": "default"}))
        timer.start()
        self.addCleanup(timer.cancel)
        out = self.run_register(spec)
        self.assertIn("waiting for project service", out)
        self.assertEqual(len(self.named("projects", "service")), 1)
        self.assertNotIn(("POST", "/v3/projects", {}), self.ks.calls)

    def test_a_conflicting_create_finds_what_the_other_job_made(self):
        # Another Job creates role `reader` between this one's lookup and its create.
        real = self.ks.handle

        def racing(method, path, query, headers, body):
            if method == "POST" and path == "/v3/roles" and not self.named("roles", "observer"):
                self.ks.add("roles", {"name": "observer"})
            return real(method, path, query, headers, body)

        self.ks.handle = racing
        out = self.run_register(self.spec(roles=["observer"]))
        self.assertEqual(len(self.named("roles", "observer")), 1)
        self.assertNotIn("created role observer", out)

    def test_keystone_busy_for_a_moment_is_waited_for(self):
        self.ks.fail_next = [503, 502]
        self.run_register(self.spec())
        self.assertEqual(len(self.named("services", "glance")), 1)

    def test_a_refused_admin_login_fails_without_printing_the_password(self):
        with open(self.admin, encoding="utf-8") as f:
            admin = json.load(f)
        admin["password"] = "wrong-$ecret"
        self.write("admin.json", json.dumps(admin))
        proc = subprocess.run(
            [sys.executable, os.path.join(HERE, "register.py"), self.spec(), self.admin],
            capture_output=True, text=True, timeout=60,
            env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("POST /auth/tokens: HTTP 401", proc.stderr)
        self.assertNotIn("$ecret", proc.stdout + proc.stderr)
        self.assertEqual(self.named("services", "glance"), [])

    def test_an_answer_that_echoes_a_password_is_printed_masked(self):
        # Keystone's validation errors may quote what was sent; the user's password is in
        # the create that fails here.
        real = self.ks.handle

        def echoing(method, path, query, headers, body):
            if method == "POST" and path == "/v3/users":
                return 400, {}, {"error": {"message": f"Invalid input: {body['user']['password']!r}"}}
            return real(method, path, query, headers, body)

        self.ks.handle = echoing
        with self.assertRaises(SystemExit) as exit:
            self.run_register(self.spec(password_file=self.pw, service_project="create"))
        message = str(exit.exception.code)
        self.assertIn("POST /users: HTTP 400", message)
        self.assertIn("***", message)
        self.assertNotIn("gl@nce pw", message)

    def tearDown(self):
        register.SECRETS.clear()


if __name__ == "__main__":
    unittest.main()
