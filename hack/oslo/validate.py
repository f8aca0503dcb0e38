"""Checks every oslo config file under a directory with the real projects' oslo-config-validator.

Run by hack/oslo-validate.sh with the Python of the venv that holds the 2025.1 projects.

For each known file name (nova.conf, ml2_conf.ini, ...) it runs oslo-config-validator's own
entry point with the namespace list of the project's config generator, and adds three checks the
validator leaves out:

* [keystone_authtoken] is on the validator's list of groups it does not check (its options depend
  on the auth plugin). Here it is checked against keystonemiddleware's options plus the options
  of the plugin named by `auth_type` (default `password`), so a misspelling there fails too.
* Sections that a file declares itself (cinder's `enabled_backends`, glance's multi-store
  `enabled_backends`) are validated against the group their options come from
  (`backend_defaults`, the store's `glance_store` options) instead of being reported unknown.
* Options marked deprecated for removal are reported like renamed (deprecated) options.

A deprecated option is a failure unless --allow-deprecated is given: kstack's templates are
written for this release, and a deprecated option is removed in a later one, which would turn an
upgrade into a broken service. KEPT_DEPRECATED names the exceptions, each with its reason. Exit status: 0 all files pass, 1 any file fails, 2 no oslo file
found or bad usage.
"""

import argparse
import io
import json
import logging
import os
import subprocess
import sys
import tempfile

from oslo_config import cfg
from oslo_config import generator
from oslo_config import validator

# Namespaces per file name, from each project's oslo-config-generator configuration
# (nova: etc/nova/nova-config-generator.conf, neutron: etc/oslo-config-generator/*.{conf,ini},
# cinder: tools/config/cinder-config-generator.conf, ...). The generator lists are what the
# project documents as valid in that file; the lines marked "kolla" are library namespaces
# whose options the project registers at run time and kolla-ansible's templates set.
NAMESPACES = {
    "keystone.conf": ("keystone", [
        "keystone", "oslo.cache", "oslo.log", "oslo.messaging", "oslo.policy", "oslo.db",
        "oslo.middleware", "osprofiler",
        "oslo.concurrency",  # commented out in keystone's generator file, used by keystone
    ]),
    "glance-api.conf": ("glance", [
        "castellan.config", "glance.api", "glance.store", "os_brick", "glance.multi_store",
        "oslo.concurrency", "oslo.messaging", "oslo.db", "oslo.policy",
        "keystonemiddleware.auth_token", "oslo.limit", "oslo.log", "oslo.middleware.cors",
        "oslo.middleware.healthcheck", "oslo.middleware.http_proxy_to_wsgi", "oslo.reports",
    ]),
    "placement.conf": ("placement", [
        "placement.conf", "keystonemiddleware.auth_token", "oslo.log", "oslo.middleware.cors",
        "oslo.middleware.http_proxy_to_wsgi", "oslo.policy", "osprofiler",
    ]),
    "nova.conf": ("nova", [
        "nova.conf", "oslo.limit", "oslo.log", "oslo.messaging", "oslo.policy", "oslo.privsep",
        "oslo.service.periodic_task", "oslo.service.service", "oslo.middleware",
        "oslo.concurrency", "oslo.reports", "oslo.versionedobjects",
        "keystonemiddleware.auth_token", "osprofiler", "os_vif", "os_brick",
    ]),
    "neutron.conf": ("neutron", [
        "neutron", "neutron.agent", "neutron.db", "neutron.experimental", "neutron.extensions",
        "nova.auth", "ironic.auth", "placement.auth", "designate.auth", "oslo.log", "oslo.cache",
        "oslo.db", "oslo.policy", "oslo.privsep", "oslo.concurrency", "oslo.messaging",
        "oslo.middleware.cors", "oslo.middleware.healthcheck",
        "oslo.middleware.http_proxy_to_wsgi", "oslo.reports", "oslo.service.periodic_task",
        "oslo.service.service", "oslo.service.sslutils", "oslo.service.wsgi",
        "oslo.versionedobjects", "keystonemiddleware.auth_token", "osprofiler",
    ]),
    "ml2_conf.ini": ("neutron", ["neutron.ml2", "neutron.ml2.ovn", "oslo.log"]),
    "openvswitch_agent.ini": ("neutron", ["neutron.ml2.ovs.agent", "oslo.log"]),
    "dhcp_agent.ini": ("neutron", [
        "neutron.az.agent", "neutron.base.agent", "neutron.dhcp.agent", "oslo.log",
    ]),
    "l3_agent.ini": ("neutron", [
        "neutron.az.agent", "neutron.base.agent", "neutron.l3.agent", "oslo.log",
    ]),
    "metadata_agent.ini": ("neutron", ["neutron.metadata.agent", "oslo.log", "oslo.cache"]),
    "heat.conf": ("heat", [
        "heat.common.cache", "heat.common.config", "heat.common.context", "heat.common.crypt",
        "heat.engine.clients.os.keystone.heat_keystoneclient", "heat.engine.hot.functions",
        "heat.common.wsgi", "heat.engine.clients", "heat.engine.notification",
        "heat.engine.resources", "heat.api.aws.ec2token", "keystonemiddleware.auth_token",
        "oslo.cache", "oslo.messaging", "oslo.middleware", "oslo.log", "oslo.policy",
        "oslo.reports", "oslo.service.service", "oslo.service.periodic_task",
        "oslo.service.sslutils", "oslo.versionedobjects", "osprofiler",
        # Not in heat's generator file, used at run time: oslo.messaging's queue manager
        # (use_queue_manager) locks a file under [oslo_concurrency] lock_path, and without it
        # every RPC call of heat-api failed (kolla-ansible sets it too).
        "oslo.concurrency",
    ]),
    "cinder.conf": ("cinder", [
        "castellan.config", "cinder", "keystonemiddleware.auth_token", "osprofiler",
        "oslo.config", "oslo.concurrency", "oslo.db", "oslo.log", "oslo.messaging",
        "oslo.middleware", "oslo.policy", "oslo.privsep", "oslo.reports",
        "oslo.service.periodic_task", "oslo.service.service", "oslo.service.sslutils",
        "oslo.service.wsgi", "oslo.versionedobjects", "os_brick",
    ]),
}

AUTHTOKEN = "keystone_authtoken"


class Problem:
    def __init__(self, kind, section, option, detail=""):
        self.kind = kind  # unknown-section, unknown-option, deprecated
        self.section = section
        self.option = option
        self.detail = detail

    def line(self, path):
        what = {
            "unknown-section": "unknown section",
            "unknown-option": "unknown option",
            "deprecated": "deprecated option",
            "error": "cannot validate",
        }[self.kind]
        if self.kind == "error":
            return f"{path}: {what}: {self.detail}"
        where = f"[{self.section}]" if self.option is None else f"[{self.section}] {self.option}"
        extra = f" ({self.detail})" if self.detail else ""
        return f"{path}: {what} {where}{extra}"


_opt_data_cache = {}


def opt_data(namespaces):
    """The machine-readable option data the validator builds from the namespaces."""
    key = tuple(namespaces)
    if key not in _opt_data_cache:
        conf = cfg.ConfigOpts()
        conf.register_cli_opts(validator._validator_opts)
        conf(["--input-file", "-"], default_config_files=[], default_config_dirs=[])
        groups = generator._get_groups(generator._list_opts(list(namespaces)))
        _opt_data_cache[key] = generator._generate_machine_readable_data(groups, conf)
    return _opt_data_cache[key]


def names(opts):
    out = set()
    for o in opts:
        out.add(o["name"])
        if o.get("dest"):
            out.add(o["dest"])
    return out


def parse(path):
    sections = {}
    cfg.ConfigParser(path, sections).parse()
    return sections


def first(sections, section, option):
    values = sections.get(section, {}).get(option)
    return values[-1] if values else None


def dynamic_sections(name, sections, data):
    """Sections the file itself declares, mapped to the group whose options they take."""
    out = {}
    backends = first(sections, "DEFAULT", "enabled_backends")
    if not backends:
        return out
    for item in (b.strip() for b in backends.split(",")):
        if not item:
            continue
        if name == "cinder.conf":
            # cinder registers every volume driver option in [backend_defaults] as well.
            out[item] = "backend_defaults"
        elif name == "glance-api.conf" and ":" in item:
            # glance multi-store: `id:type`, [id] takes the glance_store options.
            out[item.split(":", 1)[0].strip()] = "glance_store"
            # The reserved stores glance adds itself when multi-store is on.
            out["os_glance_tasks_store"] = "glance_store"
            out["os_glance_staging_store"] = "glance_store"
    return {s: g for s, g in out.items() if s in sections and g in data["options"]}


def run_validator(path, namespaces, allow_deprecated):
    """Runs oslo-config-validator's entry point; returns its (level, message) log records."""
    argv = ["oslo-config-validator", "--input-file", path]
    for ns in namespaces:
        argv += ["--namespace", ns]
    if not allow_deprecated:
        argv.append("--fatal-warnings")
    records = []

    class Collect(logging.Handler):
        def emit(self, record):
            records.append((record.levelno, record.getMessage()))

    root = logging.getLogger()
    handler = Collect(level=logging.WARNING)
    root.addHandler(handler)
    old_argv = sys.argv
    try:
        sys.argv = argv
        status = validator.main()
    finally:
        sys.argv = old_argv
        root.removeHandler(handler)
    return status, records


def plugin_options(sections, section):
    """Names of the keystoneauth1 options a section with `auth_type` may set, or None when the
    plugin does not exist: the plugin's own options plus the session and common auth options.
    Projects register these at run time for the plugin chosen, so generated option lists (and
    the validator) do not contain them."""
    from keystoneauth1 import loading

    plugin = first(sections, section, "auth_type") or first(sections, section, "auth_plugin")
    plugin = plugin or "password"
    try:
        opts = list(loading.get_plugin_options(plugin))
    except Exception:  # noqa: BLE001 - any failure means the plugin name is wrong
        return plugin, None
    known = set()
    for o in opts + loading.get_session_conf_options() + loading.get_auth_common_conf_options():
        known.add(o.dest)
        known.add(o.name.replace("-", "_"))
    return plugin, known


def authtoken_problems(sections, data):
    """[keystone_authtoken]: keystonemiddleware's options plus those of its auth plugin."""
    if AUTHTOKEN not in sections:
        return []
    known = names(data["options"].get(AUTHTOKEN, {}).get("opts", []))
    plugin, extra = plugin_options(sections, AUTHTOKEN)
    if extra is None:
        return [Problem("unknown-option", AUTHTOKEN, "auth_type",
                        f"no keystoneauth1 plugin named {plugin!r}")]
    return [Problem("unknown-option", AUTHTOKEN, opt, "not an option of keystonemiddleware "
                    f"or of the {plugin!r} auth plugin")
            for opt in sorted(sections[AUTHTOKEN]) if opt not in known | extra]


def is_plugin_option(sections, data, dynamic, section, option):
    """Whether `option` belongs to the auth plugin of a keystoneauth1 section ([nova] in
    cinder.conf, ...): one whose registered options include `auth_type`."""
    group = dynamic.get(section, section)
    if "auth_type" not in names(data["options"].get(group, {}).get("opts", [])):
        return False
    _, extra = plugin_options(sections, section)
    return extra is not None and option in extra


# Options deprecated for removal that kstack still writes, each with the reason it must.
KEPT_DEPRECATED = {
    ("oslo_messaging_rabbit", "heartbeat_in_pthread"):
        "deprecated together with eventlet, which 2025.1's WSGI apps still load (nova-api under "
        "uWSGI is eventlet-patched): without it their message bus heartbeats run on green "
        "threads that an idle WSGI worker never schedules, and RabbitMQ drops the connection",
}


def removal_problems(sections, data, dynamic):
    out = []
    for section, options in sections.items():
        group = dynamic.get(section, section)
        for o in data["options"].get(group, {}).get("opts", []):
            if (group, o["name"]) in KEPT_DEPRECATED:
                continue
            if o.get("deprecated_for_removal") and (
                    o["name"] in options or o.get("dest") in options):
                reason = " ".join((o.get("deprecated_reason") or "").split("\n\n")[0].split())
                reason = reason if len(reason) <= 160 else reason[:157] + "..."
                out.append(Problem("deprecated", section, o["name"],
                                   "deprecated for removal" + (f": {reason}" if reason else "")))
    return out


def check(path, name, allow_deprecated):
    project, namespaces = NAMESPACES[name]
    data = opt_data(namespaces)
    sections = parse(path)
    dynamic = dynamic_sections(name, sections, data)
    problems = []
    to_check = path
    tmp = None
    if dynamic:
        # Validate a copy whose declared sections carry their option group's name.
        with open(path) as f:
            lines = f.read().split("\n")
        for i, line in enumerate(lines):
            s = line.strip()
            if s.startswith("[") and s.endswith("]") and s[1:-1].strip() in dynamic:
                lines[i] = f"[{dynamic[s[1:-1].strip()]}]"
        tmp = tempfile.NamedTemporaryFile("w", suffix="-" + name, delete=False)
        tmp.write("\n".join(lines))
        tmp.close()
        to_check = tmp.name
    try:
        status, records = run_validator(to_check, namespaces, allow_deprecated)
    finally:
        if tmp:
            os.unlink(tmp.name)
    back = {}
    for section, group in dynamic.items():
        back.setdefault(group, []).append(section)

    def original(group, option):
        for s in back.get(group, []):
            if option in sections.get(s, {}):
                return s
        return group

    seen_sections = set()
    explained = 0  # validator errors that are options of a section's auth plugin
    for level, msg in records:
        if msg.endswith(" is not part of the sample config"):
            section, _, option = msg[: -len(" is not part of the sample config")].partition("/")
            section = original(section, option)
            if section not in data["options"] and section not in dynamic and section != "DEFAULT":
                if section not in seen_sections:
                    seen_sections.add(section)
                    problems.append(Problem("unknown-section", section, None,
                                            f"no {project} option group of that name"))
                continue
            if is_plugin_option(sections, data, dynamic, section, option):
                explained += 1
            else:
                problems.append(Problem("unknown-option", section, option))
        elif msg.startswith("Deprecated opt ") and msg.endswith(" found"):
            section, _, option = msg[len("Deprecated opt "): -len(" found")].partition("/")
            new = [f"[{d['replacement_group']}] {d['replacement_name']}"
                   for d in data["deprecated_options"].get(section, [])
                   if option in (d["name"], d.get("dest"))]
            problems.append(Problem("deprecated", original(section, option), option,
                                    f"an old name; use {new[0]}" if new else "an old name"))
        elif level >= logging.ERROR:
            problems.append(Problem("unknown-option", "?", "?", msg))
    problems += authtoken_problems(sections, data)
    problems += removal_problems(sections, data, dynamic)
    failed = any(p.kind != "deprecated" or not allow_deprecated for p in problems)
    if status != 0 and not failed and not explained:
        # The validator failed for a reason not parsed above: never pass it silently.
        problems.append(Problem("unknown-option", "?", "?",
                                f"oslo-config-validator exited {status}"))
        failed = True
    n_opts = sum(len(v) for v in sections.values())
    return failed, problems, len(sections), n_opts, project


def check_files(paths, allow_deprecated):
    """Child mode: checks files of one project, printing one JSON result per line."""
    for path in paths:
        try:
            failed, problems, n_sections, n_opts, project = check(
                path, os.path.basename(path), allow_deprecated)
        except cfg.ParseError as e:
            # Not valid INI at all: the file fails; the others are still checked.
            failed, n_sections, n_opts = True, 0, 0
            project = NAMESPACES[os.path.basename(path)][0]
            problems = [Problem("error", "?", None, str(e))]
        print(json.dumps({
            "path": path, "failed": failed, "sections": n_sections, "options": n_opts,
            "project": project,
            "problems": [[p.kind, p.section, p.option, p.detail] for p in problems],
        }), flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--allow-deprecated", action="store_true",
                    help="report deprecated options as warnings instead of failures")
    ap.add_argument("--check", nargs="+", metavar="FILE", help=argparse.SUPPRESS)
    args = ap.parse_args()
    # The validator's own INFO lines (ignored groups, ...) would drown the summary.
    logging.basicConfig(level=logging.WARNING, stream=io.StringIO())
    if args.check:
        return check_files(args.check, args.allow_deprecated)
    if not args.dir:
        ap.error("the directory to check is required")
    files = []
    for root, dirs, fnames in os.walk(args.dir):
        dirs.sort()
        for f in sorted(fnames):
            if f in NAMESPACES:
                files.append(os.path.join(root, f))
    if not files:
        print(f"oslo-validate: no oslo config file found under {args.dir} (looked for: "
              f"{', '.join(sorted(NAMESPACES))}); nothing was validated, which is a failure",
              file=sys.stderr)
        return 2
    # One process per project: each project registers its options in the global cfg.CONF when
    # imported, and two projects in one process collide (nova and cinder both define
    # enable_new_services).
    by_project = {}
    for path in files:
        by_project.setdefault(NAMESPACES[os.path.basename(path)][0], []).append(path)
    results = {}
    for project, paths in sorted(by_project.items()):
        cmd = [sys.executable, os.path.abspath(__file__), "--check", *paths]
        if args.allow_deprecated:
            cmd.append("--allow-deprecated")
        child = subprocess.run(cmd, capture_output=True, text=True)
        got = [json.loads(line) for line in child.stdout.splitlines() if line.startswith("{")]
        for r in got:
            results[r["path"]] = r
        if child.returncode != 0 or len(got) != len(paths):
            # The options of the project could not be loaded: every file of it fails.
            detail = (child.stderr.strip().splitlines() or ["no output"])[-1]
            for path in paths:
                results.setdefault(path, {
                    "path": path, "failed": True, "sections": 0, "options": 0,
                    "project": project,
                    "problems": [["error", "?", None, f"the validator crashed: {detail}"]],
                })
    failures = 0
    for path in files:
        r = results[path]
        rel = os.path.relpath(path, args.dir)
        verdict = "FAIL" if r["failed"] else "ok"
        print(f"{verdict:4} {rel} ({r['project']} 2025.1: {r['sections']} sections, "
              f"{r['options']} options)")
        for kind, section, option, detail in r["problems"]:
            level = "warning" if kind == "deprecated" and args.allow_deprecated else "error"
            print(f"     {level}: {Problem(kind, section, option, detail).line(rel)}")
        failures += r["failed"]
    print(f"oslo-validate: {len(files) - failures} of {len(files)} files pass"
          + (f", {failures} fail" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
