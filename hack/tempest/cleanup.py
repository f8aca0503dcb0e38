#!/usr/bin/env python3
"""Deletes what an interrupted tempest run left in the cloud, and nothing else.

Tempest's dynamic credentials put every test class in a project of its own named
tempest-<Class>-<n>, with users named tempest-*; a run that is stopped leaves those projects with
their servers, floating IPs, routers, networks, security groups and keypairs. This deletes the
resources owned by projects named tempest-*, then those projects and the users named tempest-*.
It never touches another project's resources (kstack verify's, an operator's). `tempest cleanup`
is not used: it deletes everything absent from a saved state, which on a shared cloud includes
whatever another user created meanwhile.

    python cleanup.py [--dry-run]   (KSTACK_CONFIG_DIR, KSTACK_TEMPEST_HOSTS as for gen_conf.py)
"""

import argparse
import os
import sys
import time

import yaml


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--config-dir", default=os.environ.get("KSTACK_CONFIG_DIR",
                                                           os.path.expanduser("~/.config/kstack")))
    ap.add_argument("--auth-url", default="http://keystone.openstack.svc:5000/v3")
    ap.add_argument("--region", default="RegionOne")
    args = ap.parse_args()
    with open(os.path.join(args.config_dir, "passwords.yml"), encoding="utf-8") as f:
        pw = yaml.safe_load(f)["keystone_admin_password"]
    import openstack

    c = openstack.connect(
        load_yaml_config=False, load_envvars=False, auth_type="password",
        auth={"auth_url": args.auth_url, "username": "admin", "password": pw,
              "project_name": "admin", "user_domain_name": "Default",
              "project_domain_name": "Default"},
        region_name=args.region, interface="internal")
    projects = {p.id: p.name for p in c.identity.projects() if (p.name or "").startswith("tempest-")}
    n = 0

    def rm(kind, obj, fn):
        nonlocal n
        n += 1
        print(f"cleanup: {'would delete' if args.dry_run else 'deleting'} {kind} "
              f"{getattr(obj, 'name', '') or ''} ({obj.id})", file=sys.stderr)
        if not args.dry_run:
            try:
                fn()
            except Exception as e:  # best effort: report and go on
                print(f"cleanup: {kind} {obj.id}: {e}", file=sys.stderr)

    servers = [s for s in c.compute.servers(all_projects=True) if s.project_id in projects]
    for s in servers:
        rm("server", s, lambda s=s: c.compute.delete_server(s, force=False))
    if servers and not args.dry_run:
        deadline = time.time() + 180
        while time.time() < deadline and any(
                c.compute.find_server(s.id, ignore_missing=True, all_projects=True) for s in servers):
            time.sleep(3)
    for f in c.network.ips():
        if f.project_id in projects:
            rm("floating ip", f, lambda f=f: c.network.delete_ip(f))
    for r in c.network.routers():
        if r.project_id in projects:
            def del_router(r=r):
                c.network.update_router(r, external_gateway_info={})
                for p in c.network.ports(device_id=r.id):
                    if p.device_owner and p.device_owner.startswith("network:router_interface"):
                        c.network.remove_interface_from_router(r, port_id=p.id)
                c.network.delete_router(r)
            rm("router", r, del_router)
    for p in c.network.ports():
        if p.project_id in projects and not (p.device_owner or "").startswith("network:"):
            rm("port", p, lambda p=p: c.network.delete_port(p))
    for net in c.network.networks():
        if net.project_id in projects:
            rm("network", net, lambda net=net: c.network.delete_network(net))
    for sg in c.network.security_groups():
        if sg.project_id in projects:
            rm("security group", sg, lambda sg=sg: c.network.delete_security_group(sg))
    for pid, name in projects.items():
        proj = c.identity.get_project(pid)
        rm("project", proj, lambda proj=proj: c.identity.delete_project(proj))
    for u in c.identity.users():
        if (u.name or "").startswith("tempest-"):
            rm("user", u, lambda u=u: c.identity.delete_user(u))
    for g in c.identity.groups():
        if (g.name or "").startswith("tempest-"):
            rm("group", g, lambda g=g: c.identity.delete_group(g))
    for r in c.identity.roles():
        if (r.name or "").startswith("tempest-"):
            rm("role", r, lambda r=r: c.identity.delete_role(r))
    for d in c.identity.domains():
        if (d.name or "").startswith("tempest-"):
            def del_domain(d=d):
                c.identity.update_domain(d, is_enabled=False)
                c.identity.delete_domain(d)
            rm("domain", d, del_domain)
    print(f"cleanup: {n} resources of projects and users named tempest-*"
          f"{' (dry run)' if args.dry_run else ''}", file=sys.stderr)


if __name__ == "__main__":
    main()
