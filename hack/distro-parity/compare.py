"""Compares kstack's config.json files with kolla-ansible 2025.1's, per base distribution.

    python compare.py KOLLA_ANSIBLE_DIR KNOWN_DIFFERENCES WORK

hack/distro-parity.sh renders kstack's files for each distribution into WORK/<distro>/ (the
distributions are kstack's own table, which the script saved from `kstack template
--distro-facts` as WORK/distro-facts.json; this file keeps no list of its own): the
config directory `etc/` (its globals.yml sets kolla_base_distro), the Kubernetes target's
`--config-files` tree `kubernetes/<service>/<container>/` and the Compose target's
`compose/config/<service>/<container>/`. For each distribution this renders kolla-ansible's
config.json templates (KOLLA_ANSIBLE_DIR/roles/<role>/templates/<container>.json.j2) as Ansible
would: the role's defaults, group_vars/all.yml and the role's vars, under the same globals.yml
and passwords.yml, for one all-in-one inventory host. Each is compared with kstack's config.json
of the container of the same name:

- the command, after whitespace normalisation;
- each config file kolla-ansible copies, matched by source or destination file name: its
  destination, owner and mode. A file kstack lacks is a difference, unless kolla-ansible marks
  it optional (copied only when the operator provides one);
- each permission kolla-ansible sets: owner, mode and recursion; one kstack lacks is a
  difference;
- the distribution-dependent paths of the files both copy: every absolute path on a line of
  kolla-ansible's rendered file that differs between the distributions (the Galera provider,
  the Apache binary) must appear in kstack's file.

What kstack has and kolla-ansible has not (its own start scripts, files) is not compared.
Differences kstack makes on purpose are listed in KNOWN_DIFFERENCES with a reason. An entry
holds for every distribution and may only cover a difference that is the same on all four: a
difference that depends on the distribution is a defect in kstack, never an entry. An entry
that matches nothing is stale.

Exit status: 0 no difference outside the list, 1 a difference, a problem of the list or a
kolla-ansible template that does not render, 2 bad usage.
"""

import collections
import fnmatch
import importlib.metadata
import json
import posixpath
import re
import sys
from pathlib import Path


from kolla_render import KollaAnsible, RenderError, UsageError, load_entries, load_yaml

# The distributions compared, in kstack's order: set by main from WORK/distro-facts.json.
DISTROS = ()
TARGETS = {"kubernetes": "kubernetes", "compose": "compose/config"}
KINDS = {
    "command": "command",
    "file": "config file {}",
    "dest": "config file {} dest",
    "owner": "config file {} owner",
    "perm": "config file {} mode",
    "permission": "permission {}",
    "distro-path": "distribution path in {}",
}
# What kstack has, in a difference, when it has no such file or permission.
NOTHING = "nothing"
ENTRY_KEYS = {"kind", "container", "subject", "target", "reason"}

Difference = collections.namedtuple(
    "Difference", "target distro container kind subject kolla kstack"
)


def kstack_containers(root):
    """kstack's rendered containers under root: {container: (service/container, directory)}."""
    found = {}
    for path in sorted(root.glob("*/*/config.json")):
        found[path.parent.name] = (f"{path.parent.parent.name}/{path.parent.name}", path.parent)
    return found


def names_distribution(template):
    """Whether a config file template of kolla-ansible names the distribution (or its Python)."""
    return template.exists() and re.search(
        r"\b(kolla_base_distro|distro_python_version)\b", template.read_text()) is not None


def kolla_renders(kolla, work, containers):
    """kolla-ansible's config.json of each container, and the text of each config file it
    renders from a template of its role ({(role, file): {distro: text}}), per distribution."""
    configs = {}
    files = collections.defaultdict(dict)
    for distro in DISTROS:
        globals_yml = load_yaml(work / distro / "etc" / "globals.yml")
        passwords_yml = load_yaml(work / distro / "etc" / "passwords.yml")
        if globals_yml.get("kolla_base_distro") != distro:
            raise UsageError(f"{work / distro}/etc/globals.yml: kolla_base_distro is not {distro}")
        renderers = {}
        for name in containers:
            path = kolla.templates[name]
            role = path.parent.parent.name
            if role not in renderers:
                renderers[role] = kolla.renderer(role, globals_yml, passwords_yml)
            render_role = renderers[role]
            config = json.loads(render_role(path))
            configs[distro, name] = config
            for entry in config["config_files"]:
                source = posixpath.basename(entry["source"])
                template = path.parent / f"{source}.j2"
                if names_distribution(template) and distro not in files[role, source]:
                    files[role, source][distro] = render_role(template)
    return configs, files


def normalise(path):
    return posixpath.normpath(path)


def find_file(entry, files):
    """kstack's config file matching kolla-ansible's `entry` by source, else by dest name."""
    for key in ("source", "dest"):
        name = posixpath.basename(entry[key])
        for candidate in files:
            if posixpath.basename(candidate[key]) == name:
                return candidate
    return None


def describe_file(entry):
    return f"{normalise(entry['dest'])} ({entry['owner']} {entry['perm']})"


def describe_permission(entry):
    words = [entry["owner"]]
    if "perm" in entry:
        words.append(f"mode {entry['perm']}")
    if entry.get("recurse"):
        words.append("recursive")
    return " ".join(words)


PATH = re.compile(r"(?<![\w.:/-])/[\w.+@-]+(?:/[\w.+@-]+)*")


def distro_paths(renders, distro):
    """The absolute paths on the lines of `distro`'s render that another distribution's lacks,
    with their line: {path: line}."""
    others = [set(text.splitlines()) for d, text in renders.items() if d != distro]
    return {path: line for line in renders[distro].splitlines()
            if any(line not in o for o in others) for path in PATH.findall(line)}


def counterpart(line, path, text):
    """The line of `text` that sets what kolla-ansible's `line` sets to `path` (the same text
    before the path, spaces aside), or a note that there is none."""
    key = "".join(line[: line.index(path)].split())
    for candidate in text.splitlines():
        if key and "".join(candidate.split()).startswith(key):
            return candidate.strip()
    return f"no {path}"


def compare(kolla_config, kstack_config, kstack_dir, file_renders, distro):
    """Differences of one container as (kind, subject, kolla-ansible's, kstack's), and the
    optional kolla-ansible files kstack does not have."""
    diffs, optional = [], []
    command = " ".join(kolla_config["command"].split())
    ours = " ".join(kstack_config["command"].split())
    if command != ours:
        diffs.append(("command", "", command, ours))
    for entry in kolla_config["config_files"]:
        source = posixpath.basename(entry["source"])
        mine = find_file(entry, kstack_config["config_files"])
        if mine is None:
            if entry.get("optional"):
                optional.append(normalise(entry["dest"]))
            else:
                diffs.append(("file", source, describe_file(entry), NOTHING))
            continue
        if normalise(entry["dest"]) != normalise(mine["dest"]):
            diffs.append(("dest", source, normalise(entry["dest"]), normalise(mine["dest"])))
        for field in ("owner", "perm"):
            if entry[field] != mine[field]:
                diffs.append((field, source, entry[field], mine[field]))
        renders = file_renders.get(source)
        if renders:
            text = (kstack_dir / posixpath.basename(mine["source"])).read_text()
            for path, line in sorted(distro_paths(renders, distro).items()):
                if path not in text:
                    diffs.append(
                        ("distro-path", source, line.strip(), counterpart(line, path, text)))
    ours = {normalise(p["path"]): p for p in kstack_config.get("permissions", [])}
    for entry in kolla_config.get("permissions", []):
        path = normalise(entry["path"])
        theirs = describe_permission(entry)
        mine = describe_permission(ours[path]) if path in ours else NOTHING
        if theirs != mine:
            diffs.append(("permission", path, theirs, mine))
    return diffs, optional


def load_known(path):
    """The known differences: a list of {kind, container, subject, target, reason}."""

    def target(entry):
        if "target" in entry and entry["target"] not in TARGETS:
            return f"target must be one of {', '.join(TARGETS)}"
        return None

    return load_entries(path, ENTRY_KEYS, KINDS, {"container", "reason"}, target)


def matches(entry, diff):
    return (
        entry["kind"] == diff.kind
        and entry.get("target", diff.target) == diff.target
        and fnmatch.fnmatchcase(diff.container, entry["container"])
        and fnmatch.fnmatchcase(diff.subject, entry.get("subject", "*"))
    )


def describe_entry(number, entry):
    return f"entry {number} ({entry['kind']} {entry['container']} {entry.get('subject', '*')})"


def apply_known(entries, diffs):
    """The differences the entries cover, and the problems of the list: stale entries, and
    entries matching a difference that depends on the distribution (which stays a failure)."""
    covered, problems = set(), []
    for number, entry in enumerate(entries, 1):
        hits = [d for d in diffs if matches(entry, d)]
        if not hits:
            problems.append(f"stale {describe_entry(number, entry)}: matches no difference")
        groups = collections.defaultdict(list)
        for d in hits:
            groups[d.target, d.container, d.kind, d.subject].append(d)
        for (target, container, kind, subject), group in sorted(groups.items()):
            distros = [d for d in DISTROS if any(g.distro == d for g in group)]
            if len(distros) < len(DISTROS):
                how = f"only on {', '.join(distros)}"
            elif len({(g.kolla, g.kstack) for g in group}) > 1:
                how = "not the same on each distribution"
            else:
                covered.update(group)
                continue
            problems.append(
                f"{describe_entry(number, entry)} covers {container} "
                f"{KINDS[kind].format(subject)} ({target}), which depends on the distribution "
                f"({how}): fix it in kstack instead")
    return covered, problems


def format_difference(key, targets):
    distro, container, kind, subject, kolla, kstack = key
    return (f"{distro} {container}: {KINDS[kind].format(subject)}: kolla-ansible has {kolla} "
            f"vs kstack has {kstack} ({', '.join(targets)})")


def report(diffs, covered, problems, summary_lines, kolla):
    """Prints what was compared and every failing difference; returns the exit status."""
    for line in summary_lines:
        print(line)
    print("variables kolla-ansible's defaults leave to its tasks or inventory (rendered as unset):")
    for role, names in sorted(kolla.undefined.items()):
        if names:
            print(f"  {role}: {', '.join(sorted(names))}")
    failing = collections.defaultdict(list)
    for d in diffs:
        if d not in covered:
            failing[d.distro, d.container, d.kind, d.subject, d.kolla, d.kstack].append(d.target)
    order = {d: i for i, d in enumerate(DISTROS)}
    for key in sorted(failing, key=lambda k: (order[k[0]], k[1:])):
        print("DIFFERENT " + format_difference(key, failing[key]))
    for problem in problems:
        print(f"KNOWN-DIFFERENCES {problem}")
    if failing or problems:
        print(f"distro-parity: FAILED: {len(failing)} differences not in the known differences, "
              f"{len(problems)} problems of the list")
        return 1
    print("distro-parity: OK")
    return 0


def load_distros(path):
    """The names of the distributions in `kstack template --distro-facts`'s output."""
    try:
        facts = json.loads(path.read_text())
        names = tuple(d["name"] for d in facts)
    except (OSError, ValueError, TypeError, KeyError) as e:
        raise UsageError(f"{path}: not the output of kstack template --distro-facts: {e}")
    if not names:
        raise UsageError(f"{path}: no distribution")
    return names


def kstack_renders(work):
    """kstack's rendered containers per (distribution, target)."""
    found = {}
    for distro in DISTROS:
        for target, sub in TARGETS.items():
            found[distro, target] = kstack_containers(work / distro / sub)
            if not found[distro, target]:
                raise UsageError(f"{work / distro / sub}: no config.json")
    return found


def describe_mapping(kolla, names, mapped):
    """Lines naming what is compared, and what only one side has."""
    role = {n: p.parent.parent.name for n, p in kolla.templates.items()}
    roles = {role[n] for n in mapped}
    unmapped = sorted(f"{role[n]}/{n}" for n in kolla.templates
                      if n not in names and role[n] in roles)
    other_roles = sorted(set(role.values()) - roles)
    lines = [
        f"kolla-ansible {importlib.metadata.version('kolla-ansible')}: {len(kolla.templates)} "
        f"config.json templates; {len(mapped)} have a kstack container of the same name",
        f"not in kstack: {', '.join(unmapped)}; and the {len(other_roles)} roles kstack has no "
        f"service of ({', '.join(other_roles)})",
    ]
    only_kstack = sorted(names - set(kolla.templates))
    if only_kstack:
        lines.append(f"only in kstack: {', '.join(only_kstack)}")
    return lines


def compare_all(kolla, kstack, mapped, configs, files):
    """Every difference, one line of counts per distribution, and kolla-ansible's optional
    files kstack does not have."""
    diffs, lines, optional = [], [], set()
    for distro in DISTROS:
        counts = []
        for target in TARGETS:
            found = kstack[distro, target]
            compared = [n for n in mapped if n in found]
            for name in compared:
                container, directory = found[name]
                role = kolla.templates[name].parent.parent.name
                file_renders = {source: r for (r_role, source), r in files.items()
                                if r_role == role}
                kstack_config = json.loads((directory / "config.json").read_text())
                found_diffs, found_optional = compare(
                    configs[distro, name], kstack_config, directory, file_renders, distro)
                diffs += [Difference(target, distro, container, *d) for d in found_diffs]
                optional.update(f"{container} {path}" for path in found_optional)
            counts.append(f"{target} {len(compared)} containers")
        lines.append(f"{distro}: compared {', '.join(counts)}; "
                     f"{sum(d.distro == distro for d in diffs)} differences")
    return diffs, lines, optional


def main(argv):
    if len(argv) != 3:
        raise UsageError("usage: compare.py KOLLA_ANSIBLE_DIR KNOWN_DIFFERENCES WORK")
    ansible_dir, known_path, work = (Path(a) for a in argv)
    if not (ansible_dir / "group_vars" / "all.yml").exists():
        raise UsageError(f"{ansible_dir}: not kolla-ansible's ansible directory")
    global DISTROS
    DISTROS = load_distros(work / "distro-facts.json")
    entries = load_known(known_path)
    kolla = KollaAnsible(ansible_dir)
    kstack = kstack_renders(work)
    names = set().union(*kstack.values())
    mapped = sorted(names & set(kolla.templates))
    configs, files = kolla_renders(kolla, work, mapped)
    diffs, counts, optional = compare_all(kolla, kstack, mapped, configs, files)
    covered, problems = apply_known(entries, diffs)
    summary = describe_mapping(kolla, names, mapped) + counts + [
        f"optional in kolla-ansible, not required: {', '.join(sorted(optional))}",
        f"{len(covered)} of {len(diffs)} differences are known ({known_path.name})",
    ]
    return report(diffs, covered, problems, summary, kolla)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except UsageError as e:
        print(f"distro-parity: {e}", file=sys.stderr)
        sys.exit(2)
    except RenderError as e:
        print(f"distro-parity: FAILED: cannot render kolla-ansible's {e}", file=sys.stderr)
        sys.exit(1)
