#!/usr/bin/env python3
"""Writes tempest.conf for the cloud kstack deployed, from the cloud itself.

Run by hack/tempest.sh in the tempest venv. It
- lists the namespace's Services through the Kubernetes API (KUBECONFIG) and writes their
  ClusterIPs as a hosts-format file (--hosts-file), which kstack_resolve.py in the venv uses
  to resolve the catalog's cluster DNS names (<svc>.<namespace>.svc): /etc/hosts is untouched;
- reads the rendered OpenStack config files from the namespace's ConfigMaps (ML2 drivers, the
  OVS agent's firewall driver, nova's console settings, glance's import methods, each
  service's [oslo_policy]) where tempest needs a fact no API tells;
- authenticates as admin with keystone_admin_password from the config directory's
  passwords.yml at keystone's internal endpoint, reads the catalog, the API versions,
  neutron's extensions, nova's hypervisors and cinder's services and pools;
- creates or finds what tempest needs: two flavors, the image (the whole-disk guest of
  hack/guest.sh when given --guest-dir, else a small raw image), a project and user
  for heat-tempest-plugin's non-admin tests, and finds the external network if there is one;
- probes whether neutron accepts IPv6 subnets (with and without SLAAC modes);
- writes tempest.conf (--out) with the feature flags for what the cloud has and lacks.

Everything it creates in the cloud is named kstack-tempest-*; it is reused by the next run.
"""

import argparse
import base64
import configparser
import hashlib
import io
import json
import os
import re
import ssl
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request

import yaml

PREFIX = "kstack-tempest"


def say(msg):
    print(f"gen_conf: {msg}", file=sys.stderr, flush=True)


# --- Kubernetes ----------------------------------------------------------------------------


class Kube:
    """Just enough of the Kubernetes API: GET with the kubeconfig's credentials."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            cfg = yaml.safe_load(f)
        ctx_name = cfg.get("current-context")
        ctxs = {c["name"]: c["context"] for c in cfg.get("contexts", [])}
        ctx = ctxs.get(ctx_name) or next(iter(ctxs.values()))
        cluster = {c["name"]: c["cluster"] for c in cfg["clusters"]}[ctx["cluster"]]
        user = {u["name"]: u.get("user") or {} for u in cfg.get("users", [])}.get(ctx.get("user"), {})
        base = os.path.dirname(os.path.abspath(path))
        self.server = cluster["server"].rstrip("/")
        self.tmp = tempfile.mkdtemp(prefix="kstack-tempest-kube-")

        def material(data_key, file_key, src):
            if src.get(data_key):
                p = os.path.join(self.tmp, data_key)
                with open(p, "wb") as f:
                    f.write(base64.b64decode(src[data_key]))
                os.chmod(p, 0o600)
                return p
            if src.get(file_key):
                return os.path.join(base, src[file_key])
            return None

        ca = material("certificate-authority-data", "certificate-authority", cluster)
        self.ctx = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
        if cluster.get("insecure-skip-tls-verify"):
            self.ctx.check_hostname = False
            self.ctx.verify_mode = ssl.CERT_NONE
        cert = material("client-certificate-data", "client-certificate", user)
        key = material("client-key-data", "client-key", user)
        if cert:
            self.ctx.load_cert_chain(cert, key)
        self.token = user.get("token")
        if not self.token and user.get("tokenFile"):
            with open(os.path.join(base, user["tokenFile"]), encoding="utf-8") as f:
                self.token = f.read().strip()

    def get(self, path):
        req = urllib.request.Request(self.server + path, headers={"Accept": "application/json"})
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(req, context=self.ctx, timeout=30) as r:
            return json.load(r)

    def close(self):
        for name in os.listdir(self.tmp):
            os.unlink(os.path.join(self.tmp, name))
        os.rmdir(self.tmp)


def write_hosts(kube, ns, path):
    items = kube.get(f"/api/v1/namespaces/{ns}/services")["items"]
    lines = [f"# The Services of namespace {ns} (written by hack/tempest/gen_conf.py)"]
    for svc in sorted(items, key=lambda s: s["metadata"]["name"]):
        ip = svc["spec"].get("clusterIP")
        if not ip or ip == "None":
            continue
        n = svc["metadata"]["name"]
        lines.append(f"{ip} {n}.{ns}.svc {n}.{ns}.svc.cluster.local {n}.{ns}")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)
    return {s["metadata"]["name"]: s for s in items}


def rendered_configs(kube, ns):
    """The INI files of the namespace's ConfigMaps and Secrets (kstack keeps the files with
    passwords in Secrets): file name -> [(object name, ConfigParser)]. Read in memory only."""
    out = {}
    objs = [(cm, cm.get("data") or {}) for cm in
            kube.get(f"/api/v1/namespaces/{ns}/configmaps")["items"]]
    for sec in kube.get(f"/api/v1/namespaces/{ns}/secrets")["items"]:
        data = {}
        for key, b64 in (sec.get("data") or {}).items():
            if re.search(r"\.(conf|ini)$", key):
                data[key] = base64.b64decode(b64).decode("utf-8", "replace")
        objs.append((sec, data))
    for cm, files in objs:
        for key, text in files.items():
            if not re.search(r"\.(conf|ini)$", key):
                continue
            cp = configparser.ConfigParser(strict=False, interpolation=None)
            try:
                cp.read_string(text)
            except configparser.Error:
                continue
            out.setdefault(key, []).append((cm["metadata"]["name"], cp))
    return out


def conf_value(configs, filename, section, option, default=None):
    for _, cp in configs.get(filename, []):
        if cp.has_option(section, option):
            return cp.get(section, option)
    return default


def to_bool(v, default=False):
    if v is None:
        return default
    return str(v).strip().lower() in ("1", "true", "yes", "on")


# --- the config directory --------------------------------------------------------------------


def load_yaml(path):
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f) or {}
    except FileNotFoundError:
        return {}


def plain(v, default):
    """A globals.yml value, unless it is a Jinja expression (then kolla-ansible's default)."""
    if v is None or (isinstance(v, str) and ("{{" in v or "{%" in v)):
        return default
    return v


# --- OpenStack ---------------------------------------------------------------------------------


def sha256_files(paths, extra=b""):
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    h.update(extra)
    return h.hexdigest()[:12]


def find_or_upload(conn, name, path, disk_format, container_format, **props):
    for img in conn.image.images(name=name):
        if img.status == "active":
            return img
        conn.image.delete_image(img, ignore_missing=True)
    say(f"uploading {path} as image {name} ({disk_format})")
    img = conn.image.create_image(
        name=name, filename=path, disk_format=disk_format, container_format=container_format,
        wait=True, timeout=900, allow_duplicates=True, **props)
    img = conn.image.get_image(img.id)
    if img.visibility != "public":  # the test projects boot it
        img = conn.image.update_image(img, visibility="public")
    return img


def cleanup_stale_images(conn, keep_ids):
    for img in conn.image.images():
        if img.name and img.name.startswith(PREFIX + "-") and img.id not in keep_ids:
            say(f"deleting stale image {img.name} ({img.id})")
            conn.image.delete_image(img, ignore_missing=True)


def find_or_create_flavor(conn, name, ram):
    f = conn.compute.find_flavor(name, ignore_missing=True)
    if f is None:
        say(f"creating flavor {name} ({ram} MiB, 1 vCPU, 1 GiB disk)")
        f = conn.compute.create_flavor(name=name, ram=ram, vcpus=1, disk=1, is_public=True)
    return f


def max_microversion(conn, service_type, interface):
    try:
        data = conn.session.get_endpoint_data(service_type=service_type, interface=interface,
                                              region_name=conn.config.region_name)
        mv = data.max_microversion if data else None
        return f"{mv[0]}.{mv[1]}" if mv else None
    except Exception as e:  # discovery is best effort: tempest then uses its own default
        say(f"no microversion for {service_type}: {e}")
        return None


def probe_ipv6(conn):
    """Which IPv6 subnets neutron accepts: (any IPv6 subnet, with SLAAC RA/address modes)."""
    for old in conn.network.networks(name=f"{PREFIX}-ipv6-probe"):  # a run that died
        conn.network.delete_network(old, ignore_missing=True)
    net = conn.network.create_network(name=f"{PREFIX}-ipv6-probe")
    plain6 = slaac = False
    try:
        try:
            s = conn.network.create_subnet(network_id=net.id, ip_version=6, cidr="2001:db8:1::/64",
                                           name=f"{PREFIX}-ipv6-probe")
            conn.network.delete_subnet(s)
            plain6 = True
        except Exception as e:
            say(f"neutron refuses an IPv6 subnet: {e}")
        try:
            s = conn.network.create_subnet(network_id=net.id, ip_version=6, cidr="2001:db8:2::/64",
                                           ipv6_ra_mode="slaac", ipv6_address_mode="slaac",
                                           name=f"{PREFIX}-ipv6-probe")
            conn.network.delete_subnet(s)
            slaac = True
        except Exception as e:
            say(f"neutron refuses an IPv6 SLAAC subnet: {e}")
    finally:
        conn.network.delete_network(net)
    return plain6, slaac


def heat_user(conn, password, roles):
    """A project and a member user for heat-tempest-plugin's non-admin tests (it has no
    dynamic credentials), with heat's stack owner role when the cloud has one."""
    domain = conn.identity.find_domain("Default") or conn.identity.find_domain("default")
    name = f"{PREFIX}-heat"
    project = conn.identity.find_project(name, domain_id=domain.id)
    if project is None:
        project = conn.identity.create_project(name=name, domain_id=domain.id,
                                               description="heat-tempest-plugin (hack/tempest.sh)")
    user = conn.identity.find_user(name, domain_id=domain.id)
    if user is None:
        user = conn.identity.create_user(name=name, domain_id=domain.id, password=password,
                                         default_project_id=project.id)
    else:
        conn.identity.update_user(user, password=password)
    for rname in roles:
        role = conn.identity.find_role(rname)
        if role is not None:
            conn.identity.assign_project_role_to_user(project, user, role)
    return name


# --- main -----------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--namespace", default="openstack")
    ap.add_argument("--config-dir", default=os.environ.get("KSTACK_CONFIG_DIR",
                                                           os.path.expanduser("~/.config/kstack")))
    ap.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    ap.add_argument("--hosts-file", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--image-cache", required=True, help="directory for the small raw image")
    ap.add_argument("--guest-dir", help="hack/guest.sh's result directory (its disk.raw boots by itself)")
    ap.add_argument("--auth-url", help="default http://keystone.<namespace>.svc:5000/v3")
    ap.add_argument("--public-network", default=os.environ.get("KSTACK_TEMPEST_PUBLIC_NETWORK"),
                    help="name or id of the external network (default: the oldest one that is "
                         "not a test's own, kstack-verify-*/tempest-*)")
    ap.add_argument("--external-subnet", default=os.environ.get("KSTACK_TEMPEST_EXTERNAL_SUBNET"),
                    help="when the cloud has no external network: make one, public1, flat on "
                         "--physical-network with this IPv4 subnet (its first address the "
                         "gateway), kept for later runs")
    ap.add_argument("--physical-network", default="physnet1",
                    help="the provider network of --external-subnet (default physnet1, the "
                         "bridge of the first neutron_external_interface)")
    args = ap.parse_args()
    ns = args.namespace

    # The cluster: Services (the names' addresses) and the rendered config files.
    if not args.kubeconfig:
        sys.exit("gen_conf: KUBECONFIG is not set")
    globals_ = load_yaml(os.path.join(args.config_dir, "globals.yml"))
    tls_external = to_bool(plain(globals_.get("kolla_enable_tls_external"), "no"))
    kube = Kube(args.kubeconfig.split(os.pathsep)[0])
    kstack_ca = None
    try:
        services = write_hosts(kube, ns, args.hosts_file)
        configs = rendered_configs(kube, ns)
        if tls_external:
            # kstack's CA, when kstack made the public endpoints' certificate.
            try:
                secret = kube.get(f"/api/v1/namespaces/{ns}/secrets/kstack-ca")
                kstack_ca = base64.b64decode(secret["data"]["ca.crt"]).decode()
            except (urllib.error.HTTPError, KeyError):
                kstack_ca = None
    finally:
        kube.close()
    say(f"{len(services)} Services of {ns} written to {args.hosts_file}")

    # HTTPS public endpoints: the CA tempest trusts, kstack's own or the operator's, as
    # etc/ca.crt beside tempest.conf (hack/tempest.sh also points SSL_CERT_FILE there, for the
    # clients that take no CA option, the dashboard test's).
    ca_file = os.path.join(os.path.dirname(os.path.abspath(args.out)), "ca.crt")
    operator_ca = plain(globals_.get("kolla_admin_openrc_cacert"), "")
    ca_pem = kstack_ca
    if not ca_pem and tls_external and operator_ca:
        with open(operator_ca, encoding="utf-8") as f:
            ca_pem = f.read()
    if ca_pem:
        with open(ca_file, "w", encoding="utf-8") as f:
            f.write(ca_pem)
        say(f"the public endpoints use HTTPS: {'kstack' if kstack_ca else 'the operator'}'s CA written to {ca_file}")
    else:
        if os.path.exists(ca_file):
            os.unlink(ca_file)
        ca_file = None
    passwords = load_yaml(os.path.join(args.config_dir, "passwords.yml"))
    admin_password = passwords.get("keystone_admin_password")
    if not admin_password:
        sys.exit(f"gen_conf: no keystone_admin_password in {args.config_dir}/passwords.yml")
    region = plain(globals_.get("openstack_region_name"), "RegionOne")
    auth_url = args.auth_url or f"http://keystone.{ns}.svc:5000/v3"

    import openstack  # after the hosts file exists (kstack_resolve reads it on each lookup)

    conn = openstack.connect(
        load_yaml_config=False, load_envvars=False, auth_type="password",
        auth={"auth_url": auth_url, "username": "admin", "password": admin_password,
              "project_name": "admin", "user_domain_name": "Default",
              "project_domain_name": "Default"},
        region_name=region, interface="internal", cacert=ca_file)
    access = conn.session.auth.get_access(conn.session)
    catalog = {}
    for svc in access.service_catalog.catalog:
        for ep in svc.get("endpoints", []):
            if ep.get("region_id", ep.get("region")) in (region, None):
                catalog.setdefault(svc["type"], {})[ep["interface"]] = ep["url"]
    say("catalog: " + ", ".join(f"{t} {sorted(e)}" for t, e in sorted(catalog.items())))
    # Tempest's clients use the public endpoints, as a cloud's users do (through the public
    # gateway when the cloud has a public address; the Services' names otherwise, which the
    # hosts file resolves), unless some service has none.
    iface = "public" if all("public" in e for e in catalog.values()) else "internal"
    identity = catalog.get("identity", {}).get(iface, auth_url)
    uri_v3 = identity.rstrip("/")
    if not re.search(r"/v3$", uri_v3):
        uri_v3 += "/v3"
    unresolved = []
    for eps in catalog.values():
        host = urllib.parse.urlsplit(eps.get(iface, "")).hostname
        if host and host.endswith(f".{ns}.svc") and host.split(".")[0] not in services:
            unresolved.append(host)
    if unresolved:
        say(f"warning: no Service for {sorted(set(unresolved))}")

    has = {t: t in catalog for t in ("compute", "image", "network", "orchestration",
                                      "placement", "object-store", "identity")}
    # Cinder's type in the catalog: block-storage (the official one, kstack registers it), or
    # an older cloud's volumev3.
    volume_type = next((t for t in ("block-storage", "volumev3") if t in catalog), None)
    has["volume"] = volume_type is not None

    # Flavors.
    flavor = find_or_create_flavor(conn, f"{PREFIX}-128", 128)
    flavor_alt = find_or_create_flavor(conn, f"{PREFIX}-192", 192)

    # Images.
    guest = None
    os.makedirs(args.image_cache, exist_ok=True)
    if args.guest_dir:
        g = args.guest_dir
        disk = os.path.join(g, "disk.raw")
        h = sha256_files([disk])
        image = find_or_upload(conn, f"{PREFIX}-guest-{h}", disk, "raw", "bare")
        guest = {"image": image, "disk": disk}
        keep = {image.id}
    else:
        raw = os.path.join(args.image_cache, "kstack-tempest-raw.img")
        if not os.path.exists(raw):
            with open(raw + ".tmp", "wb") as f:
                f.truncate(1 << 20)  # 1 MiB of zeros: the server goes ACTIVE, nothing boots
            os.replace(raw + ".tmp", raw)
        h = sha256_files([raw])
        image = find_or_upload(conn, f"{PREFIX}-raw-{h}", raw, "raw", "bare")
        keep = {image.id}
    cleanup_stale_images(conn, keep)

    # Networks.
    # The external network: --public-network, else the first one that is not some test's own
    # (kstack verify and tempest create and delete theirs while they run).
    externals = [n for n in conn.network.networks(is_router_external=True)]
    if args.public_network:
        public = next((n for n in externals if args.public_network in (n.name, n.id)), None)
        if public is None:
            sys.exit(f"gen_conf: no external network {args.public_network}")
    else:
        public = next((n for n in sorted(externals, key=lambda n: n.created_at or "")
                       if not re.match(r"(kstack-verify-|tempest-|kstack-tempest-)", n.name or "")),
                      None)
    if public is None and args.external_subnet and has["network"]:
        # What an operator makes once after a deploy (kolla-ansible's init-runonce names it
        # public1): a provider network for routers' gateways and floating IPs. Tempest's
        # floating IP and scenario tests need one that outlives a test.
        public = conn.network.create_network(
            name="public1", is_router_external=True, provider_network_type="flat",
            provider_physical_network=args.physical_network)
        conn.network.create_subnet(
            name="public1-subnet", network_id=public.id, ip_version=4,
            cidr=args.external_subnet, is_dhcp_enabled=False)
        say(f"external network public1 made: flat on {args.physical_network}, "
            f"subnet {args.external_subnet}")
    extensions = sorted(e.alias for e in conn.network.extensions()) if has["network"] else []
    plain6, slaac6 = probe_ipv6(conn) if has["network"] else (False, False)

    # Compute and volume facts.
    hypervisors = list(conn.compute.hypervisors()) if has["compute"] else []
    compute_mv = max_microversion(conn, "compute", iface) if has["compute"] else None
    volume_mv = max_microversion(conn, volume_type, iface) if has["volume"] else None
    placement_mv = max_microversion(conn, "placement", iface) if has["placement"] else None
    cinder_binaries, pools = set(), []
    if has["volume"]:
        cinder_binaries = {s.binary for s in conn.block_storage.services()
                           if s.state == "up" and s.status == "enabled"}
        try:
            pools = list(conn.block_storage.backend_pools())
        except Exception as e:
            say(f"no cinder pools: {e}")
    caps = (pools[0].capabilities or {}) if pools else {}
    backend_names = sorted({(p.name.split("@", 1)[1].split("#", 1)[0] if "@" in p.name else p.name)
                            for p in pools})

    # Glance's import methods.
    import_methods = []
    if has["image"]:
        try:
            r = conn.image.get("/info/import")
            import_methods = r.json().get("import-methods", {}).get("value", [])
        except Exception as e:
            say(f"no glance import info: {e}")

    # Heat: a member user for heat-tempest-plugin.
    heat_password = hashlib.sha256(("kstack-tempest-heat:" + admin_password).encode()).hexdigest()[:24]
    role_names = {r.name for r in conn.identity.roles()}
    heat_roles = ["member"] + (["heat_stack_owner"] if "heat_stack_owner" in role_names else [])
    heat_username = heat_user(conn, heat_password, heat_roles) if has["orchestration"] else None

    # Facts from the rendered config files.
    type_drivers = conf_value(configs, "ml2_conf.ini", "ml2", "type_drivers", "flat,vlan,vxlan")
    firewall_driver = conf_value(configs, "openvswitch_agent.ini", "securitygroup",
                                 "firewall_driver", "openvswitch")
    vnc_enabled = to_bool(conf_value(configs, "nova.conf", "vnc", "enabled", "true"), True)
    vnc_url = conf_value(configs, "nova.conf", "vnc", "novncproxy_base_url")

    # What each service enforces: its rendered [oslo_policy], else oslo.policy's defaults (the
    # venv's oslo.policy is 2025.1's, as the cloud's: enforce_scope and enforce_new_defaults
    # are true since oslo.policy 4.4; kstack sets neither and no service overrides them).
    policy_defaults = {"enforce_scope": True, "enforce_new_defaults": True}
    try:
        from oslo_policy import opts as policy_opts
        for group, opts in policy_opts.list_opts():
            for o in opts:
                if group == "oslo_policy" and o.name in policy_defaults:
                    policy_defaults[o.name] = bool(o.default)
    except ImportError:
        pass

    def scope(filename):
        return all(to_bool(conf_value(configs, filename, "oslo_policy", o), d)
                   for o, d in policy_defaults.items())

    # Horizon has no catalog entry: its Service says whether it is there, and where.
    dashboard_url = None
    if "horizon" in services:
        ports = services["horizon"]["spec"].get("ports") or []
        port = next((p["port"] for p in ports if p.get("name") in ("http", "horizon")),
                    ports[0]["port"] if ports else 80)
        dashboard_url = f"http://horizon.{ns}.svc" + ("" if port == 80 else f":{port}") + "/"
    # With a public address, the dashboard as its users reach it: through the public gateway
    # (HTTPS on 443 with TLS on the public endpoints, where Horizon's cookies are secure-only).
    public_host = (plain(globals_.get("kolla_external_fqdn"), "")
                   or plain(globals_.get("kolla_external_vip_address"), ""))
    gateway_ports = {p["port"] for p in (services.get("haproxy", {}).get("spec", {})
                                         .get("ports") or [])}
    if dashboard_url and public_host:
        if tls_external and 443 in gateway_ports:
            dashboard_url = f"https://{public_host}/"
        elif 80 in gateway_ports:
            dashboard_url = f"http://{public_host}/"

    run_validation = bool(public) and guest is not None
    conf = configparser.ConfigParser(interpolation=None)
    conf.optionxform = str
    ws = os.path.dirname(os.path.dirname(os.path.abspath(args.out)))

    def section(name, **values):
        conf[name] = {k: ("true" if v is True else "false" if v is False else str(v))
                      for k, v in values.items() if v is not None}

    # A guest that cannot be reached over SSH: tempest logs its console at DEBUG
    # (remote_client), so that one logger logs at DEBUG and the rest as oslo.log's defaults
    # say; the console then lands in tempest.log and in the failed test's captured output.
    from oslo_log import log as oslo_log
    log_levels = list(oslo_log.get_default_log_levels())
    log_levels.append("tempest.lib.common.utils.linux.remote_client=DEBUG")
    section("DEFAULT", log_dir=os.path.join(ws, "logs"), log_file="tempest.log",
            default_log_levels=",".join(log_levels))
    section("oslo_concurrency", lock_path=os.path.join(ws, "tempest_lock"))
    section("auth", use_dynamic_credentials=True, create_isolated_networks=True,
            admin_username="admin", admin_password=admin_password, admin_project_name="admin",
            admin_domain_name="Default",
            admin_system="all" if scope("keystone.conf") else None)
    section("identity", uri_v3=uri_v3, auth_version="v3", region=region,
            v3_endpoint_type=iface, admin_role="admin", default_domain_id="default",
            disable_ssl_certificate_validation=False, ca_certificates_file=ca_file)
    section("identity-feature-enabled", api_v2=False, api_v3=True, trust=True,
            access_rules=True, security_compliance=False)
    section("service_available", nova=has["compute"], glance=has["image"],
            neutron=has["network"], cinder=has["volume"], heat=has["orchestration"],
            swift=False, horizon=dashboard_url is not None)
    if dashboard_url:
        section("dashboard", dashboard_url=dashboard_url)
    section("compute", image_ref=image.id, image_ref_alt=image.id, flavor_ref=flavor.id,
            flavor_ref_alt=flavor_alt.id, endpoint_type=iface, region=region,
            build_timeout=300, build_interval=2, min_compute_nodes=max(1, len(hypervisors)),
            max_microversion=compute_mv,
            fixed_network_name=None)
    many = len(hypervisors) > 1
    # What the cloud has beyond tempest's defaults: nova (Wallaby and later) turns a server
    # name with dots into a host name with dashes, and its libvirt driver rescues a server
    # with the rescue disk on the bus and device an image asks for (stable device rescue).
    # With several compute hosts, live migration moves the disk with the memory (block
    # migration: each host keeps its instances' disks on its own storage, none is shared).
    # Left off, with the reason: changing a guest's password needs the QEMU guest agent in the
    # guest (the guest image has none); personality files (nova's API before microversion
    # 2.57) need a guest that writes them from the metadata, which the guest image does not;
    # resize and cold migration to another host copy the disk between the compute hosts over
    # SSH, which kstack does not set up yet (no nova-ssh).
    section("compute-feature-enabled",
            console_output=True, resize=False, cold_migration=False, live_migration=many,
            live_migrate_back_and_forth=False, block_migration_for_live_migration=many,
            volume_backed_live_migration=False, can_migrate_between_any_hosts=many,
            shelve=True, shelve_migrate=False, snapshot=True, pause=True, suspend=True,
            rescue=True, stable_rescue=True, interface_attach=has["network"],
            metadata_service=True, config_drive=True, personality=False,
            change_password=False, enable_instance_password=True,
            vnc_console=bool(vnc_enabled and vnc_url), spice_console=False,
            serial_console=False, attach_encrypted_volume=False, swap_volume=False,
            volume_multiattach=False, disk_config=True,
            unified_limits=False, hostname_fqdn_sanitization=True)
    section("placement", endpoint_type=iface, region=region, max_microversion=placement_mv)
    section("image", endpoint_type=iface, region=region, build_timeout=300,
            image_caching_enabled=False)
    section("image-feature-enabled", api_v2=True, import_image="glance-direct" in import_methods,
            os_glance_reserved=True, manage_locations=False)
    section("network", endpoint_type=iface, region=region, build_timeout=300,
            public_network_id=public.id if public else None,
            floating_network_name=public.name if public else None,
            project_networks_reachable=False, shared_physical_network=False)
    section("network-feature-enabled", api_extensions=",".join(extensions), ipv6=plain6,
            ipv6_subnet_attributes=slaac6, port_security="port-security" in extensions,
            floating_ips=bool(public) and "router" in extensions,
            port_admin_state_change=True)
    section("neutron_plugin_options", available_type_drivers=type_drivers,
            q_agent="ovs" if "openvswitch" in (conf_value(
                configs, "ml2_conf.ini", "ml2", "mechanism_drivers", "openvswitch") or "") else None,
            firewall_driver=firewall_driver,
            specify_floating_ip_address_available=True)
    # ssh_timeout: a guest under QEMU TCG on two cores, with both tempest workers booting
    # guests, normally answers SSH within a minute or two; on a slow CI machine a server of
    # ServerActionsTestJSON once did not within 300 s (tempest's default). 600 s leaves room
    # for that; a guest that never answers still fails, after 10 minutes.
    section("validation", run_validation=run_validation, connect_method="floating",
            auth_method="keypair", ip_version_for_ssh=4, image_ssh_user="cirros",
            image_ssh_password="gocubsgo", image_alt_ssh_user="cirros",
            image_alt_ssh_password="gocubsgo", ssh_timeout=600, connect_timeout=60,
            ping_timeout=180, network_for_ssh=public.name if public else None)
    scenario = {"dhcp_client": "udhcpc"}
    if guest:
        scenario.update(img_file=guest["disk"], img_disk_format="raw", img_container_format="bare")
    else:
        scenario.update(img_file=os.path.join(args.image_cache, "kstack-tempest-raw.img"),
                        img_disk_format="raw", img_container_format="bare")
    section("scenario", **scenario)
    section("volume", endpoint_type=iface, region=region, catalog_type=volume_type or "block-storage",
            build_timeout=300, max_microversion=volume_mv,
            storage_protocol=caps.get("storage_protocol"),
            vendor_name=caps.get("vendor_name"),
            backend_names=",".join(backend_names) if backend_names else None,
            volume_size=1)
    section("volume-feature-enabled", backup="cinder-backup" in cinder_binaries,
            snapshot=True, clone=True, manage_snapshot=False, manage_volume=False,
            extend_attached_volume=False, multi_backend=len(backend_names) > 1)
    section("object-storage")
    section("enforce_scope", nova=scope("nova.conf"), neutron=scope("neutron.conf"),
            glance=scope("glance-api.conf"), cinder=scope("cinder.conf"),
            keystone=scope("keystone.conf"), placement=scope("placement.conf"))
    if heat_username:
        section("heat_plugin", username=heat_username, password=heat_password,
                project_name=heat_username, admin_username="admin",
                admin_password=admin_password, admin_project_name="admin", auth_url=uri_v3,
                user_domain_name="Default", project_domain_name="Default", region=region,
                endpoint_type=iface, instance_type=flavor_alt.name,
                minimal_instance_type=flavor.name, image_ref=image.name,
                minimal_image_ref=image.name,
                floating_network_name=public.name if public else None,
                skip_scenario_tests=not run_validation, build_timeout=900, volume_size=1,
                ca_file=ca_file)
    section("heat_features_enabled", stack_cancel=True, multi_cloud=False)

    body = io.StringIO()
    conf.write(body)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("# Written by hack/tempest/gen_conf.py from the deployed cloud; rewritten on every run.\n")
        f.write(body.getvalue())
    os.chmod(tmp, 0o600)
    os.replace(tmp, args.out)
    say(f"wrote {args.out}: interface {iface}, image {image.name}, "
        f"public network {public.name if public else 'none'}, run_validation {run_validation}, "
        f"{len(extensions)} network extensions, ipv6 {plain6}/{slaac6}, "
        f"compute microversion {compute_mv}, volume {volume_mv}, placement {placement_mv}")


if __name__ == "__main__":
    main()
