"""Reads every password back out of kstack's rendered files with the parsers the services use.

Run by hack/escape-check.sh with the Python of the oslo venv (hack/oslo/venv.sh), which holds the
2025.1 projects' own oslo.config and PyYAML.

kstack writes a passwords.yml value into many formats: oslo.config files (`$$` for `$`, quotes
kept), YAML (clouds.yaml), JSON (RabbitMQ's definitions), Python (Horizon's settings) and URLs
inside them (database and transport URLs). A unit test of an escape function shows what kstack
means to write; this check shows that the reader the service really runs gets the password back
exactly, whatever characters it holds.

Usage: check.py KSTACK CONFIG_DIR WORK_DIR

It fills CONFIG_DIR's passwords.yml with hard passwords (quotes, `$`, `#`, `;`, `%`, `{{ }}`,
backslashes, non-ASCII letters, Unicode line and paragraph separators, a byte order mark), each
around a unique marker, renders both targets (`kstack template --config-files` and
`--target compose`, which also writes the bootstrap tasks' files), and then, per format, parses
every file that holds a marker:

* oslo.config: a ConfigOpts with each option that holds a marker registered as the StrOpt it is
  (passwords, `connection`, `transport_url` are all StrOpts), read as the service reads it;
* YAML: PyYAML's safe_load (what openstacksdk reads clouds.yaml with);
* JSON: json.load; Python: the string constants of `ast.parse`;
* a file that is the password alone (the Compose target's secret env files, a task's password
  file): its text, less a final line break;

A value that holds a marker must be the password, or a URL whose user info decodes to it. Every
marker in a file's text must come out of the parse (one that does not was cut off, by a comment
sign say). Files of other formats are listed as not checked. Exit 0: every password read back in
every checked file, and each of the four formats was checked at least once; 1 otherwise.
"""

import ast
import json
import os
import re
import subprocess
import sys
import urllib.parse

import yaml
from oslo_config import cfg

MARK = "Mk7qZ3wX"
# marker -> (key, password) of the run, for the formats that are the bare value.
VALUES = {}
# Around each marker: every character class a format escapes. Key i gets HARD[i % len(HARD)].
HARD = [
    ("", ""),
    (" ;$\"'#%", "#; $"),
    ("$$x${a}", "$"),
    ("'\"", "\"'"),
    ("\\n\\", "\\"),
    (" #c", " "),
    ("%41{{ x }}", "{% raw %}"),
    ("é ß 中 λ", "ø"),
    ("\u2028", "\u2029"),
    ("a=b:c@d/e?f", "&g+h"),
    ("[DEFAULT]", "="),
    ("\ufeff", "\u00a0"),
    ("abc\\$x", "\\\\$$"),
]
OSLO_FILES = {
    "keystone.conf", "glance-api.conf", "placement.conf", "nova.conf", "neutron.conf",
    "ml2_conf.ini", "openvswitch_agent.ini", "dhcp_agent.ini", "l3_agent.ini",
    "metadata_agent.ini", "heat.conf", "cinder.conf",
}


def marker(i):
    return f"{MARK}{i:03d}"


def yaml_string(s):
    """A YAML double-quoted scalar of `s`, any character written as an escape YAML 1.2 reads."""
    out = []
    for c in s:
        if c in "\"\\":
            out.append("\\" + c)
        elif 0x20 <= ord(c) < 0x7f:
            out.append(c)
        elif ord(c) <= 0xffff:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    return '"' + "".join(out) + '"'


def jinja_literal(s):
    """`s` as a passwords.yml value that evaluates to `s`: kstack evaluates Jinja in passwords
    like kolla-ansible, so `{{`, `{%` and `{#` are written as expressions giving them."""
    return re.sub(r"\{[{%#]", lambda m: "{{ '" + m.group(0) + "' }}", s)


def fill_passwords(path):
    """Sets every plain password of `path` (already filled by genpwd) to a hard value; returns
    {marker: (key, value)}."""
    with open(path, encoding="utf-8") as f:
        current = yaml.safe_load(f)
    lines, values = ["---"], {}
    for i, (key, value) in enumerate(sorted(current.items())):
        if isinstance(value, dict):  # an SSH key pair: kept as genpwd made it
            lines.append(f"{key}:")
            for k, v in value.items():
                lines.append(f"  {k}: {yaml_string(v or '')}")
            continue
        if value is None or value == "":  # kept empty (e.g. docker_registry_password)
            lines.append(f"{key}:")
            continue
        before, after = HARD[i % len(HARD)]
        if key == "rabbitmq_cluster_cookie":
            # Erlang takes printable ASCII without spaces only (kstack refuses other cookies):
            # the hard characters of that set.
            before, after = "$$x${a}'\"#%\\", "\\$;="
        v = f"{before}{marker(i)}{after}"
        values[marker(i)] = (key, v)
        lines.append(f"{key}: {yaml_string(jinja_literal(v))}")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return values


def markers_in(text):
    return set(re.findall(MARK + r"\d{3}", text))


def reads_back(value, values):
    """The markers `value` holds, each with whether the value gives its password back."""
    got = {}
    for m in markers_in(value):
        want = values[m][1]
        if value == want:
            got[m] = True
            continue
        # A URL: each `user:password@host` of its (possibly multi-host) authority.
        ok = False
        if "://" in value:
            authority = value.split("://", 1)[1]
            # The authority ends at the first `/` after the last `@` (a password may hold `/`,
            # but kstack percent-encodes it).
            head = authority.split("/", 1)[0]
            for part in head.split(","):
                userinfo = part.rpartition("@")[0]
                if userinfo:
                    pw = urllib.parse.unquote(userinfo.partition(":")[2])
                    ok = ok or pw == want
        got[m] = ok
    return got


def oslo_values(path):
    """(section, option, value) for every option whose raw line holds a marker, read by oslo."""
    sections = {}
    cfg.ConfigParser(path, sections).parse()
    wanted = []
    for section, opts in sections.items():
        for option, raw in opts.items():
            if any(MARK in r for r in raw):
                wanted.append((section, option))
    conf = cfg.ConfigOpts()
    for section, option in wanted:
        group = None if section == "DEFAULT" else section
        conf.register_opt(cfg.StrOpt(option, secret=True), group=group)
    conf(args=["--config-file", path], project="kstack-escape-check", default_config_files=[],
         default_config_dirs=[])
    out = []
    for section, option in wanted:
        group = conf if section == "DEFAULT" else conf[section]
        out.append((section, option, group[option]))
    return out


def strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from strings(k)
            yield from strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from strings(v)


def parse(path, name, text):
    """(format, [strings]) of a file, or (None, None) for a format this check does not read."""
    if name in OSLO_FILES:
        return "oslo.config", [v for _, _, v in oslo_values(path)]
    if name.endswith((".yaml", ".yml")):
        with open(path, encoding="utf-8") as f:
            return "YAML", list(strings(yaml.safe_load(f)))
    if name.endswith(".json"):
        return "JSON", list(strings(json.loads(text)))
    if text.rstrip("\n") in {v for _, v in VALUES.values()}:
        # A file that is the password and nothing else (a Compose secret env file, a task's
        # password file): read as it is, less a final line break.
        return "whole file", [text.rstrip("\n")]
    if name.endswith(".py"):
        tree = ast.parse(text, filename=path)
        return "Python", [n.value for n in ast.walk(tree)
                          if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return None, None


def check_file(path, rel, values):
    """(format or None, passwords read back, failures) of one rendered file."""
    name = os.path.basename(path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    found = markers_in(text)
    if not found:
        return None, 0, []
    if name.endswith(".sh"):
        # Scripts get passwords through env or a file of their own, never as a literal: one
        # quoting mistake there runs the password as a command.
        return "shell", 0, [f"{rel}: a shell script holds {values[m][0]}; pass it through env "
                            f"or a file" for m in sorted(found)]
    try:
        fmt, parsed = parse(path, name, text)
    except Exception as e:  # the service's own parser refuses the file
        return "?", 0, [f"{rel}: cannot be read: {type(e).__name__}: {e}"]
    if fmt is None:
        return None, 0, []
    got = {}
    for s in parsed:
        for m, ok in reads_back(s, values).items():
            got[m] = got.get(m, False) or ok
    failures, ok = [], 0
    for m in sorted(found):
        key = values[m][0]
        if m not in got:
            failures.append(f"{rel}: {key} is in the file, but {fmt} reads no value holding it "
                            f"(cut off or mangled)")
        elif not got[m]:
            failures.append(f"{rel}: {key} reads back as another value under {fmt}")
        else:
            ok += 1
    return fmt, ok, failures


def self_test(work):
    """The check can fail: files written without each format's escaping are caught."""
    m = marker(0)
    values = {m: ("some_password", f"a$b\"'#{m}")}
    bad = {
        "nova.conf": f"[database]\nconnection = mysql+pymysql://nova:a$b\"'#{m}@db/nova\n",
        "clouds.yaml": f"clouds:\n  c:\n    auth:\n      password: \"a$b\"'#{m}\"\n",
        "settings.py": f"SECRET_KEY = 'a$b\"'#{m}'\n",
        "definitions.json": f'{{"users": [{{"password": "a$b\\"\'#{m}x"}}]}}\n',
    }
    d = os.path.join(work, "self-test")
    os.makedirs(d)
    caught = []
    for name, text in bad.items():
        path = os.path.join(d, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        _, _, failures = check_file(path, name, values)
        if failures:
            caught.append(name)
        else:
            print(f"FAIL self-test: {name} holds a wrongly written password and passed")
    return len(caught) == len(bad)


def main():
    kstack, config_dir, work = sys.argv[1:4]
    if not self_test(work):
        return 1
    print("ok   self-test: a password written without each format's escaping is caught")
    values = fill_passwords(os.path.join(config_dir, "passwords.yml"))
    VALUES.update(values)
    env = dict(os.environ, NO_COLOR="1")
    run = lambda *a: subprocess.run([kstack, *a, "--config-dir", config_dir], env=env,
                                    check=True, stdout=subprocess.DEVNULL)
    run("validate")
    k8s, compose = os.path.join(work, "k8s"), os.path.join(work, "compose")
    run("template", "--config-files", k8s)
    run("template", "--target", "compose", "-o", compose)

    failures, checked, unchecked = [], {}, set()
    for top in (k8s, compose):
        for root, dirs, names in os.walk(top):
            dirs.sort()
            for name in sorted(names):
                path = os.path.join(root, name)
                fmt, ok, bad = check_file(path, os.path.relpath(path, work), values)
                failures += bad
                if fmt is None and markers_in(open(path, encoding="utf-8").read()):
                    unchecked.add(os.path.splitext(name)[1] or name)
                elif fmt and ok:
                    checked[fmt] = checked.get(fmt, 0) + ok
    for fmt, n in sorted(checked.items()):
        print(f"ok   {fmt}: {n} passwords read back exactly")
    for f in failures:
        print(f"FAIL {f}")
    if unchecked:
        print("not checked here (their escaping has unit tests): " + ", ".join(sorted(unchecked)))
    missing = {"oslo.config", "YAML", "JSON", "Python"} - set(checked)
    if missing:
        print(f"FAIL no password was found in a file of: {', '.join(sorted(missing))}")
    return 1 if failures or missing else 0


if __name__ == "__main__":
    sys.exit(main())
