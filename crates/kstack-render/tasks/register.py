"""Registers a service in Keystone: the service, its internal and public endpoints, the roles
it needs and, when it has one, its user in project `service` with roles admin and service.
Rendered by kstack; run by a bootstrap Job in kolla-toolbox's Python (openstacksdk) as the admin
of clouds.yaml. Safe to run again, and beside the registrations of other services: project
`service`, which they share, is made by one of them only (SPEC's `service_project` is `create`
there, `wait` in the others), so Keystone never sees two creates of it and logs no conflict.
A create that conflicts all the same (a project deleted by hand, then two Jobs) finds what the
other Job made.

    python3 register.py SPEC.json   (the user's password, if any, in SPEC's password_file)
"""

import json
import sys
import time

import openstack
from openstack import exceptions


WAIT_FOR_PROJECT = 300


def log(msg):
    print(f"register: {msg}", flush=True)


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
        except exceptions.ConflictException:
            time.sleep(0.5 * (attempt + 1))
    found = find()
    if found is None:
        sys.exit(f"register: {what}: created elsewhere but not found")
    return found


def service_project(idn, mode):
    """Project `service`: made here when `mode` is `create`; with `wait`, another
    registration of this deploy makes it, so wait for it, and make it after WAIT_FOR_PROJECT
    seconds (that registration did not run, e.g. the project was deleted by hand)."""
    find = lambda: idn.find_project("service", domain_id="default")
    if mode == "wait":
        deadline = time.monotonic() + WAIT_FOR_PROJECT
        waited = False
        while time.monotonic() < deadline:
            found = find()
            if found is not None:
                if waited:
                    log("project service exists")
                return found
            if not waited:
                log("waiting for project service (another registration makes it)")
                waited = True
            time.sleep(1)
        log(f"no project service after {WAIT_FOR_PROJECT} s; making it here")
    return ensure("project service", find,
                  lambda: idn.create_project(name="service", domain_id="default"))


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    conn = openstack.connect(cloud="kstack")
    idn = conn.identity
    name, stype, region = spec["name"], spec["type"], spec["region"]

    service = ensure(
        f"service {name} ({stype})",
        lambda: next((s for s in idn.services() if s.name == name), None),
        lambda: idn.create_service(name=name, type=stype),
    )
    for ep in spec["endpoints"]:
        iface, url = ep["interface"], ep["url"]
        found = [e for e in idn.endpoints()
                 if e.service_id == service.id and e.interface == iface and e.region_id == region]
        if not found:
            idn.create_endpoint(service_id=service.id, interface=iface, url=url, region_id=region)
            log(f"created the {iface} endpoint {url}")
        elif found[0].url != url:
            idn.update_endpoint(found[0], url=url)
            log(f"set the {iface} endpoint to {url}")
    for role in spec.get("roles", []):
        ensure(f"role {role}", lambda r=role: idn.find_role(r), lambda r=role: idn.create_role(name=r))

    if spec.get("password_file"):
        with open(spec["password_file"], encoding="utf-8") as f:
            password = f.read()
        project = service_project(idn, spec.get("service_project", "create"))
        user = idn.find_user(name, domain_id="default")
        if user is None:
            user = ensure(
                f"user {name}",
                lambda: idn.find_user(name, domain_id="default"),
                lambda: idn.create_user(name=name, password=password, domain_id="default",
                                        default_project_id=project.id),
            )
        else:
            idn.update_user(user, password=password)
        for role_name in ("admin", "service"):
            role = ensure(f"role {role_name}", lambda r=role_name: idn.find_role(r),
                          lambda r=role_name: idn.create_role(name=r))
            idn.assign_project_role_to_user(project, user, role)
        log(f"user {name} has roles admin and service in project service")
    log(f"{name} ({stype}) registered")


if __name__ == "__main__":
    main()
