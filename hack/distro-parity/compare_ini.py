"""Compares kstack's INI config files with kolla-ansible 2025.1's, option by option.

    python compare_ini.py KOLLA_ANSIBLE_DIR KNOWN_CONFIG_DIFFERENCES DISTRO_WORK

DISTRO_WORK is one distribution's directory of hack/distro-parity.sh: the config directory
`etc/` and the Kubernetes target's `--config-files` tree `kubernetes/<service>/<container>/`.
For each of kstack's containers that kolla-ansible also has (a config.json template of the same
name), each file kstack renders for it whose name has a template in kolla-ansible's role
(`roles/<role>/templates/<file>.j2`) is rendered as kolla-ansible's config task would, with
`service_name` set to the container (so nova.conf is nova-api's, nova-compute's, ...). When
kolla-ansible's file is INI (oslo.config files, galera.cnf, libvirt's auth.conf; not Apache
sites), both are parsed as INI and compared per `[section] option`:

- missing: kolla-ansible sets the option, kstack does not;
- different: both set it, to different values after normalisation;
- extra: only kstack sets it (reported, never a failure).

Option names are read with `-` as `_` (as MySQL and oslo.config do). Values are normalised:
surrounding quotes and whitespace dropped, runs of whitespace made one space, true/yes/on and
false/no/off made true and false, a trailing slash dropped from a path, a comma-separated list
compared as a set (except the options in ORDERED, where order matters), and a repeated option compared as the
set of its values. Each passwords.yml value becomes its name (`<keystone_database_password>`),
so a secret is compared by which one it is and never printed. Addresses are not compared:
kolla-ansible uses the host's address and name, kstack the Kubernetes Services. A URL is
compared by scheme, user, path and query, without host and port; any other value in which
kolla-ansible has the host's address or name is compared only as being set.

Differences kstack makes on purpose are listed in KNOWN_CONFIG_DIFFERENCES with a reason; an
entry that matches nothing is stale. Exit status: 0 no difference outside the list, 1 a
difference, a problem of the list or a kolla-ansible template that does not render, 2 bad
usage.
"""

import collections
import configparser
import fnmatch
import re
import sys
from pathlib import Path


from kolla_render import HOST, KollaAnsible, RenderError, UsageError, load_entries, load_yaml

KINDS = ("missing", "different", "extra")
ENTRY_KEYS = {"file", "section", "option", "kind", "reason"}
# Options whose list order changes what the service does (the first tenant network type is
# the one used, ML2 calls its mechanism drivers in order).
ORDERED = {"mechanism_drivers", "tenant_network_types"}
BOOLEANS = {"true": "true", "yes": "true", "on": "true",
            "false": "false", "no": "false", "off": "false"}
URL = re.compile(r"^([a-z][\w+.-]*)://([^/?#]*)([^?#]*)(\?[^#]*)?", re.IGNORECASE)
URL_START = re.compile(r",\s*(?=[a-z][\w+.-]*://)", re.IGNORECASE)
# Any value of an option for which kolla-ansible writes its host's address or name
# (kolla_render.inventory): such an option is compared only as being set.
ADDRESS = "<address>"

Difference = collections.namedtuple("Difference", "container file section option kind kolla kstack")


class MultiDict(dict):
    """A configparser section that keeps every value of a repeated option (oslo.config's
    MultiStrOpt), in the line list configparser joins afterwards."""

    def __setitem__(self, key, value):
        if isinstance(value, list) and isinstance(self.get(key), list):
            self[key].extend(value)
        else:
            super().__setitem__(key, value)


def parse_ini(text):
    """{(section, option): [value, ...]} of an INI text, or None if it is not INI (no section
    header first, or no option: an Erlang list parses as one header)."""
    parser = configparser.RawConfigParser(
        strict=False, interpolation=None, allow_no_value=True, dict_type=MultiDict,
        empty_lines_in_values=False, default_section="\0no default section")
    # Option names keep their case; MySQL and oslo.config read `-` in a name as `_`.
    parser.optionxform = lambda option: option.replace("-", "_")
    try:
        parser.read_string(text)
    except configparser.MissingSectionHeaderError:
        return None
    options = {(section, option): (value or "").split("\n")
               for section in parser.sections() for option, value in parser.items(section)}
    return options or None


class Normaliser:
    """Turns a value into its comparable form and its printable form."""

    def __init__(self, passwords_yml, addresses):
        secrets = {v: k for k, v in passwords_yml.items() if isinstance(v, str) and len(v) >= 8}
        self.secrets = sorted(secrets.items(), key=lambda s: -len(s[0]))
        self.addresses = re.compile(
            "|".join(rf"(?<![\w.-]){re.escape(a)}(?![\w-])" for a in addresses))

    def masked(self, values):
        """The values with each password replaced by its name: what may be printed."""
        text = "\n".join(values)
        for secret, name in self.secrets:
            text = text.replace(secret, f"<{name}>")
        return text.split("\n")

    def comparable(self, option, kolla_values, values):
        """The normalised form of `values` (either side's), by the rules kolla-ansible's own
        value of the option calls for."""
        has_address = any(self.addresses.search(v) for v in kolla_values)
        items = set()
        for value in self.masked(values):
            value = unquote(" ".join(value.split()))
            if URL.match(value):
                items.add(tuple(url_shape(u) for u in URL_START.split(value)))
            elif has_address:
                items.add(ADDRESS)
            else:
                items.add(list_shape(option, value))
        return frozenset(items)


def unquote(value):
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1].strip()
    return value


def url_shape(url):
    """A URL without its hosts and ports: scheme, the users of its hosts, path and query."""
    match = URL.match(url)
    if not match:
        return url
    scheme, netloc, path, query = match.groups()
    users = sorted({host.rpartition("@")[0] for host in netloc.split(",")})
    return (scheme.lower(), tuple(users), path, query or "")


def list_shape(option, value):
    items = [item_shape(item.strip()) for item in value.split(",")]
    return tuple(items if option in ORDERED else sorted(items))


def item_shape(item):
    """A boolean as true or false, a directory without its trailing slash."""
    if item.startswith("/") and len(item) > 1:
        return item.rstrip("/")
    return BOOLEANS.get(item.lower(), item)


def compare_file(kolla_ini, kstack_ini, normaliser):
    """The differences of one file as (section, option, kind, kolla-ansible's, kstack's), and
    the number of options compared."""
    diffs = []
    for key in sorted(kolla_ini.keys() | kstack_ini.keys()):
        theirs, ours = kolla_ini.get(key), kstack_ini.get(key)
        shown = [" | ".join(normaliser.masked(v)) if v is not None else None
                 for v in (theirs, ours)]
        if ours is None:
            diffs.append((*key, "missing", shown[0], None))
        elif theirs is None:
            diffs.append((*key, "extra", None, shown[1]))
        elif (normaliser.comparable(key[1], theirs, theirs)
              != normaliser.comparable(key[1], theirs, ours)):
            diffs.append((*key, "different", *shown))
    return diffs, len(kolla_ini.keys() & kstack_ini.keys())


def task_vars(role, container):
    """What kolla-ansible's config task of `role` sets when it renders `container`'s files."""
    return {"service_name": container,
            "service": "{{ %s_services[service_name] }}" % role.replace("-", "_")}


def kstack_files(kubernetes):
    """kstack's rendered files per container: [(container, path)]."""
    return [(path.parent.name, path)
            for config in sorted(kubernetes.glob("*/*/config.json"))
            for path in sorted(config.parent.iterdir()) if path.name != "config.json"]


def compare_all(kolla, work, normaliser):
    """Every difference, a line of counts per compared file, and the files not compared."""
    globals_yml = load_yaml(work / "etc" / "globals.yml")
    passwords_yml = load_yaml(work / "etc" / "passwords.yml")
    diffs, lines, skipped = [], [], collections.defaultdict(list)
    for container, path in kstack_files(work / "kubernetes"):
        if container not in kolla.templates:
            skipped["no kolla-ansible container"].append(f"{container}/{path.name}")
            continue
        templates = kolla.templates[container].parent
        template = templates / f"{path.name}.j2"
        if not template.exists():
            skipped["no kolla-ansible template"].append(f"{container}/{path.name}")
            continue
        role = templates.parent.name
        render = kolla.renderer(role, globals_yml, passwords_yml, task_vars(role, container))
        kolla_ini, kstack_ini = parse_ini(render(template)), parse_ini(path.read_text())
        if kolla_ini is None or kstack_ini is None:
            skipped["not INI"].append(f"{container}/{path.name}")
            continue
        found, compared = compare_file(kolla_ini, kstack_ini, normaliser)
        diffs += [Difference(container, path.name, *d) for d in found]
        counts = collections.Counter(d[2] for d in found)
        lines.append((f"{container}/{path.name}", compared, counts))
    return diffs, lines, skipped


def load_known(path):
    """The known differences: a list of {file, section, option (a glob or a list of them),
    kind, reason}."""
    return load_entries(path, ENTRY_KEYS, KINDS[:2], ENTRY_KEYS - {"kind"})


def matches(entry, diff):
    return (entry["kind"] == diff.kind
            and fnmatch.fnmatchcase(f"{diff.container}/{diff.file}", entry["file"])
            and fnmatch.fnmatchcase(diff.section, entry["section"])
            and any(fnmatch.fnmatchcase(diff.option, o) for o in options(entry)))


def options(entry):
    return entry["option"] if isinstance(entry["option"], list) else [entry["option"]]


def apply_known(entries, diffs):
    """The differences the entries cover, and the stale entries."""
    covered, problems = set(), []
    for number, entry in enumerate(entries, 1):
        hits = {d for d in diffs if d.kind != "extra" and matches(entry, d)}
        if not hits:
            problems.append(f"stale entry {number} ({entry['kind']} {entry['file']} "
                            f"[{entry['section']}] {', '.join(options(entry))}): matches no "
                            "difference")
        covered |= hits
    return covered, problems


def group(diffs):
    """Differences that are the same in several containers' files, as one line each."""
    groups = collections.defaultdict(list)
    for d in diffs:
        groups[d.file, d.section, d.option, d.kind, d.kolla, d.kstack].append(d.container)
    return sorted(groups.items())


def format_group(key, containers):
    file, section, option, kind, kolla, kstack = key
    where = f"{file} [{section}] {option} ({', '.join(sorted(containers))})"
    if kind == "missing":
        return f"MISSING {where}: kolla-ansible has {kolla!r}"
    if kind == "different":
        return f"DIFFERENT {where}: kolla-ansible has {kolla!r} vs kstack has {kstack!r}"
    return f"extra {where}: kstack has {kstack!r}"


def report(diffs, covered, problems, lines, skipped, known_name):
    """Prints what was compared and every failing difference; returns the exit status."""
    print("config-parity: per file, options both set, and missing/different/extra "
          "(allowlisted of the first two):")
    for name, compared, counts in lines:
        known = sum(1 for d in covered if f"{d.container}/{d.file}" == name)
        print(f"  {name}: {compared} compared; {counts['missing']} missing, "
              f"{counts['different']} different, {counts['extra']} extra ({known} known)")
    for why, names in sorted(skipped.items()):
        print(f"not compared ({why}): {', '.join(names)}")
    print("options only kstack sets (not a failure):")
    for key, containers in group(d for d in diffs if d.kind == "extra"):
        print("  " + format_group(key, containers))
    failing = [d for d in diffs if d.kind != "extra" and d not in covered]
    failing_groups = group(failing)
    for key, containers in failing_groups:
        print(format_group(key, containers))
    for problem in problems:
        print(f"KNOWN-CONFIG-DIFFERENCES {problem}")
    print(f"{len(covered)} of {sum(d.kind != 'extra' for d in diffs)} differences are known "
          f"({known_name})")
    if failing or problems:
        print(f"config-parity: FAILED: {len(failing_groups)} differences not in the known "
              f"differences ({len(failing)} counting each container), {len(problems)} problems "
              "of the list")
        return 1
    print("config-parity: OK")
    return 0


def main(argv):
    if len(argv) != 3:
        raise UsageError("usage: compare_ini.py KOLLA_ANSIBLE_DIR KNOWN_CONFIG_DIFFERENCES "
                         "DISTRO_WORK")
    ansible_dir, known_path, work = (Path(a) for a in argv)
    if not (ansible_dir / "group_vars" / "all.yml").exists():
        raise UsageError(f"{ansible_dir}: not kolla-ansible's ansible directory")
    entries = load_known(known_path)
    kolla = KollaAnsible(ansible_dir)
    globals_yml = load_yaml(work / "etc" / "globals.yml")
    normaliser = Normaliser(load_yaml(work / "etc" / "passwords.yml"),
                            [globals_yml.get("kolla_internal_vip_address"), HOST])
    diffs, lines, skipped = compare_all(kolla, work, normaliser)
    covered, problems = apply_known(entries, diffs)
    return report(diffs, covered, problems, lines, skipped, known_path.name)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except UsageError as e:
        print(f"config-parity: {e}", file=sys.stderr)
        sys.exit(2)
    except RenderError as e:
        print(f"config-parity: FAILED: cannot render kolla-ansible's {e}", file=sys.stderr)
        sys.exit(1)
