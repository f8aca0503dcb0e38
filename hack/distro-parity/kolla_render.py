"""Renders kolla-ansible 2025.1's role templates as Ansible would, for the distro-parity checks.

A role's variables are its defaults, group_vars/all.yml and its vars, then the task's variables
(`service_name` where kolla-ansible loops over a role's services) and what kolla-ansible passes
as extra vars (globals.yml and passwords.yml), for one all-in-one inventory host. Ansible is not
installed: the Ansible filters the templates use are reimplemented here, kolla-ansible's own are
loaded from its filter_plugins.
"""

import collections
import importlib.util
import ipaddress
import json
import posixpath
import re
from collections.abc import Mapping

import jinja2
import jinja2.nativetypes
import yaml


class UsageError(Exception):
    pass


class RenderError(Exception):
    """A kolla-ansible template or default that does not render: the check is incomplete."""


# Ansible's own filters the templates and kolla-ansible's defaults use (Ansible is not
# installed; kolla-ansible's filters are loaded from its filter_plugins).
def ansible_bool(value):
    """Ansible's `bool`: yes/on/true/1 and the like are true; an unset variable is false."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in {"y", "yes", "on", "1", "true", "t"}


def ansible_ternary(value, true_value, false_value, none_value=None):
    if value is None and none_value is not None:
        return none_value
    return true_value if value else false_value


def ansible_ipaddr(value, query):
    """ansible.utils.ipaddr with the one query kolla-ansible uses, `address`."""
    if query != "address":
        raise ValueError(f"ipaddr query {query!r} is not implemented")
    try:
        return str(ipaddress.ip_interface(str(value)).ip)
    except ValueError:
        return False


def ansible_combine(*dicts, recursive=False):
    merged = {}
    for d in dicts:
        for key, value in d.items():
            if recursive and isinstance(value, dict) and isinstance(merged.get(key), dict):
                value = ansible_combine(merged[key], value, recursive=True)
            merged[key] = value
    return merged


def ansible_dict2items(mapping, key_name="key", value_name="value"):
    return [{key_name: k, value_name: v} for k, v in mapping.items()]


ANSIBLE_FILTERS = {
    "bool": ansible_bool,
    "basename": posixpath.basename,
    "ternary": ansible_ternary,
    "to_json": json.dumps,
    "combine": ansible_combine,
    "dict2items": ansible_dict2items,
    "zip": lambda *lists: list(zip(*lists)),
    "ansible.utils.ipaddr": ansible_ipaddr,
}


def kolla_filters(ansible_dir):
    """kolla-ansible's Jinja filters (kolla_address, put_address_in_context, ...)."""
    filters = {}
    for path in sorted((ansible_dir / "filter_plugins").glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"kolla_filter_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        filters.update(module.FilterModule().filters())
    return filters


def recording_undefined(names):
    """An Undefined that renders as unset (empty, false, no items) and records its name."""

    class Recording(jinja2.ChainableUndefined):
        def __init__(self, hint=None, obj=jinja2.utils.missing, name=None, exc=None):
            super().__init__(hint, obj, name, exc or jinja2.exceptions.UndefinedError)
            if obj is jinja2.utils.missing and name:
                names.add(name)

    return Recording


def render(env, source, variables):
    """`source` rendered by `env` with `variables`, which are only read as the template asks."""
    template = env.from_string(source)
    return env.concat(template.root_render_func(template.new_context(variables, shared=True)))


class Variables(Mapping):
    """A role's variables as Ansible sees them: later layers win, and a value is evaluated as
    Jinja on its first use (so only what a template reads has to evaluate). `facts` are values
    already, and win over every layer."""

    def __init__(self, env, layers, facts):
        self._env = env
        self._raw = {}
        for layer in layers:
            self._raw.update(layer)
        self._raw.update(facts)
        self._values = dict(facts)
        self._evaluating = []

    def __getitem__(self, name):
        if name not in self._values:
            if name not in self._raw:
                raise KeyError(name)
            if name in self._evaluating:
                raise ValueError("variable cycle: " + " -> ".join(self._evaluating + [name]))
            self._evaluating.append(name)
            try:
                self._values[name] = self._evaluate(self._raw[name])
            except RenderError:
                raise
            except Exception as e:
                chain = " -> ".join(self._evaluating)
                raise RenderError(f"variable {chain}: {type(e).__name__}: {e}") from None
            finally:
                self._evaluating.pop()
        return self._values[name]

    def __iter__(self):
        return iter(self._raw)

    def __len__(self):
        return len(self._raw)

    def _evaluate(self, value):
        if isinstance(value, str) and ("{{" in value or "{%" in value):
            return render(self._env, value, self)
        if isinstance(value, list):
            return [self._evaluate(v) for v in value]
        if isinstance(value, dict):
            return {k: self._evaluate(v) for k, v in value.items()}
        return value


def load_yaml(path):
    with open(path) as f:
        return yaml.safe_load(f) or {}


def load_entries(path, keys, kinds, required, check=lambda entry: None):
    """The entries of a list of known differences: mappings with only `keys`, a `kind` among
    `kinds`, every key of `required` non-empty, and no problem `check` names."""
    with open(path) as f:
        entries = yaml.safe_load(f)
    if not isinstance(entries, list):
        raise UsageError(f"{path}: expected a list of entries")
    for number, entry in enumerate(entries, 1):
        problem = None
        if not isinstance(entry, dict):
            problem = "not a mapping"
        elif set(entry) - keys:
            problem = f"unknown keys {sorted(set(entry) - keys)}"
        elif entry.get("kind") not in kinds:
            problem = f"kind must be one of {', '.join(kinds)}"
        elif not all(str(entry.get(k, "")).strip() for k in required):
            problem = f"{', '.join(sorted(required))} are required"
        else:
            problem = check(entry)
        if problem:
            raise UsageError(f"{path}: entry {number}: {problem}")
    return entries


def load_optional_yaml(path):
    return load_yaml(path) if path.exists() else {}


HOST = "kstack-node"


def inventory(globals_yml, hostvars):
    """What kolla-ansible reads from its inventory and Ansible's facts: one all-in-one host, in
    every group, whose API address is the internal VIP (the address kstack's Compose target
    binds to), on its one network interface (kolla-ansible's `network_interface`, which its
    other networks default to), with 2 CPUs and 8 GiB of memory (worker counts and buffer sizes
    follow)."""
    if "kolla_internal_vip_address" not in globals_yml:
        raise UsageError("globals.yml sets no kolla_internal_vip_address")
    address = globals_yml["kolla_internal_vip_address"]
    interface = globals_yml.get("network_interface", "eth0").replace("-", "_")
    return {
        "inventory_hostname": HOST,
        "groups": collections.defaultdict(lambda: [HOST]),
        "hostvars": hostvars,
        "api_interface_address": address,
        "ansible_facts": {"processor_vcpus": 2, "memtotal_mb": 8192,
                          interface: {"ipv4": {"address": address}}},
    }


INCLUDE = re.compile(r"{%-?\s*include\s+['\"]([^'\"]+)['\"]\s*-?%}")


def with_includes(path):
    """The template at `path` with each `{% include 'name' %}` replaced by the text of its
    role's template `name`: an include shares the template's variables, which Jinja's own
    include would evaluate all at once."""
    templates = path.parent
    while templates.name != "templates":
        templates = templates.parent
    return INCLUDE.sub(lambda m: with_includes(templates / m.group(1)), path.read_text())


class KollaAnsible:
    """kolla-ansible's templates and defaults, rendered for one globals.yml at a time."""

    def __init__(self, ansible_dir):
        self.dir = ansible_dir
        self.group_vars = load_yaml(ansible_dir / "group_vars" / "all.yml")
        self.filters = {**ANSIBLE_FILTERS, **kolla_filters(ansible_dir)}
        self.undefined = collections.defaultdict(set)
        self.templates = {}
        for path in sorted(ansible_dir.glob("roles/*/templates/*.json.j2")):
            if '"command"' in path.read_text():
                self.templates[path.name.removesuffix(".json.j2")] = path

    def renderer(self, role, globals_yml, passwords_yml, task_vars=None):
        """A function rendering a template of `role` for this globals.yml and passwords.yml, and
        the variables its task sets (`task_vars`, whose values may be Jinja)."""
        # Ansible's template settings; its variables keep their types (NativeEnvironment).
        options = dict(undefined=recording_undefined(self.undefined[role]), trim_blocks=True,
                       keep_trailing_newline=True,
                       extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"])
        text = jinja2.Environment(**options)
        native = jinja2.nativetypes.NativeEnvironment(**options)
        for env in (text, native):
            env.filters.update(self.filters)
        role_dir = self.dir / "roles" / role
        hostvars = {}
        # Ansible's precedence: role defaults, group_vars/all.yml, role vars, the task's vars,
        # then what kolla-ansible passes as extra vars (globals.yml and passwords.yml).
        variables = Variables(native, [
            text.globals,
            load_optional_yaml(role_dir / "defaults" / "main.yml"),
            self.group_vars,
            load_optional_yaml(role_dir / "vars" / "main.yml"),
            task_vars or {},
            globals_yml,
            passwords_yml,
        ], inventory(globals_yml, hostvars))
        hostvars[HOST] = variables

        def render_template(path):
            try:
                return render(text, with_includes(path), variables)
            except Exception as e:
                raise RenderError(f"{path.relative_to(self.dir)}: {e}") from None

        return render_template
