# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every input of a run checked on the controller, before the deploy lock and before any host changes. Pure.

In: the variables each host of the run has that carry a role's prefix (``hosts``: host -> name -> value, what the user
set in the inventory, with -e or in a play; the roles' own defaults are not among them) and the collection's own
knowledge (``known``, built by ``plugins/lookup/input_problems.py``): every role's argument specs, the names the roles
publish as facts, the launch profiles, the release and tuning data. Out: every problem of the run at once, each one
line that names the variable the user set, what is wrong and the fix, the hosts it concerns in front.

Each check is one function of (host, known) returning a list of (variable, message); SOURCES lists them in the order
their problems are shown, and a new check is one more line there. Where a variable already has a problem, later
checks' problems about the same variable are left out (a tensor-parallel size that is not a number is not also too
large). The checks reuse the pure functions the roles call later (the release data, the tuning options, the
thresholds, the loads), so that what is refused here is what would be refused there, only earlier.
"""

from __future__ import annotations

import difflib
import posixpath
import re
from collections.abc import Mapping

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.sm120.sglang.plugins.plugin_utils import experiment_data, experiment_settings, sglang_releases
from ansible_collections.sm120.sglang.plugins.plugin_utils import attention, gate_plan, launch_profile, smoke_thresholds


# The keys of an argument spec option that say what a value may be; the rest (description, default, required) say
# nothing of a value the user set.
_SPEC_KEYS = ("type", "elements", "choices", "options", "aliases")
# A Hugging Face repository: owner/name.
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
# Addresses that listen on every interface.
PUBLIC_HOSTS = ("0.0.0.0", "::", "")
# The value of a variable set that the controller cannot render before the roles run (it reads a role's default):
# its name is checked, its value is not.
UNREAD = object()


class Host:
    """One host's view for the checks: its name, the variables it sets, and the values resolved from them."""

    def __init__(self, name, variables, known):
        self.name = name
        self.names = set(variables or {})
        self.vars = {key: value for key, value in (variables or {}).items() if value is not UNREAD}
        self.known = known

    def value(self, name):
        """What the host sets, else the role's default where it is a plain value (not a template), else None."""
        if name in self.vars:
            return self.vars[name]
        default = self.known.get("defaults", {}).get(name)
        return None if isinstance(default, str) and "{{" in default else default

    def is_set(self, name):
        """Set, with a value the controller could read."""
        return name in self.vars

    def profiles(self):
        user = self.vars.get("sglang_service_profiles")
        profiles = dict(self.known.get("profiles") or {})
        if isinstance(user, Mapping):
            profiles.update(user)
        return profiles

    def profile_name(self):
        return str(self.value("sglang_service_profile") or "")

    def profile(self):
        """The launch profile this host serves, or None where it names none that exists."""
        profile = self.profiles().get(self.profile_name())
        return profile if isinstance(profile, Mapping) else None


def _nearest(name, candidates):
    close = difflib.get_close_matches(str(name), sorted(candidates), n=1, cutoff=0.75)
    return close[0] if close else None


def _did_you_mean(name, candidates, known_word):
    nearest = _nearest(name, candidates)
    if nearest:
        return "did you mean %s?" % nearest
    return "known %s: %s." % (known_word, ", ".join(sorted(map(str, candidates))))


def _spec(option):
    """An argument spec option reduced to what checks a value; its suboptions likewise."""
    spec = {key: option[key] for key in _SPEC_KEYS if key in option}
    if isinstance(spec.get("options"), Mapping):
        spec["options"] = {name: _spec(sub or {}) for name, sub in spec["options"].items()}
    return spec


def _int(value):
    if isinstance(value, bool):
        return None
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


# ------------------------------------------------------------------ the checks

def _nearest_of_role(name, role, names):
    """The known name of ``role`` nearest ``name``, held to what follows the prefix (all share the prefix)."""
    prefix = role + "_"
    suffixes = {known_name[len(prefix):]: known_name for known_name in names if known_name.startswith(prefix)}
    close = difflib.get_close_matches(name[len(prefix):], sorted(suffixes), n=1, cutoff=0.75)
    return suffixes[close[0]] if close else None


def unknown_names(host, known):
    """A variable with a role's prefix that no role reads: a typo, named with the nearest known name; and one whose
    prefix is a typo of a role's, where a known name is that near."""
    names = known["names"]
    roles = sorted(known["roles"], key=len, reverse=True)
    found = []
    for name in sorted(host.names):
        if name in names or name.startswith("_"):
            continue
        role = next((role for role in roles if name.startswith(role + "_")), None)
        if role is None:
            nearest = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.9)
            if nearest:
                found.append((name, "%s is set, and no role reads it: did you mean %s? Rename it." % (name, nearest[0])))
            continue
        nearest = _nearest_of_role(name, role, names)
        fix = ("did you mean %s? Rename it." % nearest if nearest
               else "the role's variables are in docs/roles/%s.md; rename or remove it." % role)
        found.append((name, "%s is set, and no role reads it (it has the prefix of the role %s): %s"
                      % (name, role, fix)))
    return found


def argument_types(host, known):
    """Each variable set, held to its role's argument spec (type, choices, elements), as the role would hold it."""
    found = []
    for name in sorted(host.vars):
        option = known["options"].get(name)
        if option is None:
            continue
        value = host.vars[name]
        if value is None:
            # null is every option's way of saying "not set, take the default or the profile's".
            continue
        result = ArgumentSpecValidator({name: _spec(option)}).validate({name: value})
        for message in result.error_messages:
            found.append((name, "%s: %s. Fix: %s" % (name, message, _type_fix(name, option))))
    return found


def _type_fix(name, option):
    kind = option.get("type", "str")
    if option.get("choices"):
        return "set %s to one of %s." % (name, ", ".join(map(str, option["choices"])))
    wanted = {"int": "a whole number", "float": "a number", "bool": "true or false, without quotes",
              "list": "a list", "dict": "a mapping", "path": "a path", "str": "a string"}.get(kind, "a " + kind)
    if option.get("elements"):
        wanted += " of %s" % option["elements"]
    return "set %s to %s (docs/roles/%s.md)." % (name, wanted, option.get("role", "<role>"))


def profile_problems(host, known):
    """The launch profile exists."""
    if host.profile() is not None:
        return []
    profiles = host.profiles()
    return [("sglang_service_profile", "sglang_service_profile is %s, and no launch profile has that name: %s Add it "
             "to sglang_service_profiles in the format of roles/sglang_service/vars/profiles.yml, or name a known one."
             % (host.profile_name() or "empty", _did_you_mean(host.profile_name(), profiles, "profiles")))]


def release_problems(host, known):
    """sglang_install_version names a release the data describes (or newest)."""
    if not host.is_set("sglang_install_version"):
        return []
    try:
        sglang_releases.resolve_version(known["releases"], host.vars["sglang_install_version"])
    except sglang_releases.ReleaseDataError as exc:
        nearest = _nearest(host.vars["sglang_install_version"], sglang_releases.versions(known["releases"]))
        return [("sglang_install_version", "sglang_install_version: %s%s" % (
            exc, " Did you mean %s?" % nearest if nearest else ""))]
    return []


def _release(host, known):
    """The release this host will run, or None where the inventory names none the data holds."""
    try:
        return sglang_releases.resolve_version(known["releases"], host.value("sglang_install_version") or "newest")
    except sglang_releases.ReleaseDataError:
        return None


def tp_size_problems(host, known):
    """The tensor-parallel size (sglang_service_tp_size, else the profile's) against the host's GPUs and nodes."""
    profile = host.profile() or {}
    if host.vars.get("sglang_service_tp_size") is not None:
        variable, raw = "sglang_service_tp_size", host.vars["sglang_service_tp_size"]
    else:
        variable, raw = "the tp_size of profile %s" % host.profile_name(), profile.get("tp_size")
    if raw is None:
        return []
    tp_size = _int(raw)
    gpus = _int(host.value("preflight_gpu_count"))
    group = host.value("sglang_service_nnodes_group") or ""
    nodes = len(known.get("groups", {}).get(group) or []) if group else 1
    nodes = max(nodes, 1)
    name = "sglang_service_tp_size" if variable == "sglang_service_tp_size" else "sglang_service_profiles"
    if tp_size is None or tp_size < 1:
        return [(name, "%s is %r: a tensor-parallel size is a whole number of GPUs, 1 or more. Fix: set "
                 "sglang_service_tp_size to the GPUs the model spans (8 on one 8-GPU host)." % (variable, raw))]
    if tp_size % nodes:
        return [(name, "%s is %d, served across the %d hosts of sglang_service_nnodes_group %s: it must be a multiple "
                 "of %d, the same GPUs on each. Fix: set sglang_service_tp_size to %d." % (
                     variable, tp_size, nodes, group, nodes, nodes * (gpus or 8)))]
    per_host = tp_size // nodes
    if gpus is None:
        return []
    if per_host > gpus:
        across = ("; a model across hosts is served by a group of them (sglang_service_nnodes_group, "
                  "docs/operations.md)" if nodes == 1 else "")
        return [(name, "%s is %d%s: %d GPUs on this host, which has %d GPUs (preflight_gpu_count)%s. Fix: set "
                 "sglang_service_tp_size to %d or fewer, a divisor of %d." % (
                     variable, tp_size, " across %d hosts" % nodes if nodes > 1 else "", per_host, gpus, across,
                     gpus, gpus))]
    if gpus % per_host:
        return [(name, "%s is %d, and this host has %d GPUs (preflight_gpu_count): the model's attention heads and "
                 "experts split evenly only over a divisor of the GPU count, and the rest would stay idle. Fix: set "
                 "sglang_service_tp_size to one of %s." % (
                     variable, per_host, gpus, ", ".join(str(n * nodes) for n in range(1, gpus + 1) if gpus % n == 0)))]
    return []


def tuning_problems(host, known):
    """The tuning options exist, go together and suit the release (data/experiments.yml, as the service reads it)."""
    if not host.is_set("sglang_service_tuning"):
        return []
    names = host.vars["sglang_service_tuning"]
    try:
        experiment_data.tuning_settings(names, data=known["experiments"], release=_release(host, known),
                                        loads=(host.profile() or {}).get("loads") or {}, searched=True)
    except experiment_data.ExperimentDataError as exc:
        unknown = [name for name in names or [] if name not in known["experiments"]["options"]] \
            if isinstance(names, (list, tuple)) else []
        hint = "".join(". For %s, did you mean %s?" % (name, _nearest(name, known["experiments"]["options"]))
                       for name in unknown if _nearest(name, known["experiments"]["options"]))
        return [("sglang_service_tuning", "%s%s" % (exc, hint))]
    return []


def patch_problems(host, known):
    """sm120_patches_enabled maps gate ids the release data knows to true or false."""
    if not host.is_set("sm120_patches_enabled"):
        return []
    asked = host.vars["sm120_patches_enabled"]
    gates = known["releases"]["gates"]
    try:
        gate_plan.enabled_map(known["releases"], asked)
    except sglang_releases.ReleaseDataError as exc:
        return [("sm120_patches_enabled", str(exc))]
    found = []
    for gate_id in sorted(set(map(str, asked or {})) - set(gates)):
        found.append(("sm120_patches_enabled", "sm120_patches_enabled names the gate %s, which the release data "
                      "(data/sglang_releases.yml) does not have: %s" % (gate_id, _did_you_mean(gate_id, gates, "gates"))))
    return found


def threshold_problems(host, known):
    """Each smoke threshold set is a number or null, as the smoke test reads it."""
    found = []
    for figure, (key, variable, _above) in smoke_thresholds.THRESHOLDS.items():
        if not host.is_set(variable):
            continue
        try:
            value = smoke_thresholds.threshold({key: host.vars[variable]}, figure)
        except smoke_thresholds.ThresholdError as exc:
            found.append((variable, "%s. Fix: write a number, or null for no threshold." % exc))
            continue
        if value is not None and value < 0:
            found.append((variable, "%s is %s: a threshold is 0 or more, or null for none." % (variable, value)))
    return found


def load_problems(host, known):
    """The loads the smoke test measures (smoke_test_loads, else the profile's) and their latency objectives."""
    if host.is_set("smoke_test_loads") and host.vars["smoke_test_loads"] not in (None, {}):
        loads, where = host.vars["smoke_test_loads"], "smoke_test_loads"
    else:
        loads, where = (host.profile() or {}).get("loads"), "the loads of profile %s" % host.profile_name()
        if loads is None:
            return []
    try:
        experiment_settings.check_loads(loads)
    except experiment_settings.ExperimentError as exc:
        message = str(exc)
        if where != "smoke_test_loads":
            message = message.replace("smoke_test_loads", where)
        return [("smoke_test_loads", "%s (%s)" % (message, where) if where not in message else message)]
    return []


def model_problems(host, known):
    """The model's path is absolute and its repository is owner/name; both named, since a missing path is fetched."""
    found = []
    path = host.vars.get("sglang_service_model_path")
    if isinstance(path, str) and not posixpath.isabs(path):
        found.append(("sglang_service_model_path", "sglang_service_model_path is %s, not an absolute path: the "
                      "server would look for the model relative to its working directory. Fix: write the full path of "
                      "the directory that holds config.json, e.g. /srv/models/glm-5-nvfp4." % path))
    repo = host.vars.get("sglang_service_model_repo")
    if repo is None:
        repo = (host.profile() or {}).get("model_repo")
    if repo not in (None, "") and not _REPO.match(str(repo)):
        found.append(("sglang_service_model_repo", "sglang_service_model_repo (or the profile's model_repo) is %s, "
                      "not a Hugging Face repository owner/name, which the model at %s is fetched from where it is "
                      "missing. Fix: write it as owner/name, e.g. lukealonso/GLM-5-NVFP4." % (
                          repo, path or "sglang_service_model_path")))
    return found


_LOOPBACK = re.compile(r"^(127\.\d+\.\d+\.\d+|::1|\[::1\]|localhost)$")


def open_server_problems(host, known):
    """Where the run serves (deploy.yml): a server that listens beyond this host needs an API key.

    Refused rather than bound to 127.0.0.1 in silence: the router and the fleet reach every host's server at its
    address, so a quiet localhost bind would break them; the refusal names both fixes before anything changes.
    """
    serving_hosts = (known.get("groups") or {}).get("gpu_hosts")
    if not known.get("serving") or (serving_hosts is not None and host.name not in serving_hosts):
        return []
    if "sglang_service_api_key" in host.names and not host.is_set("sglang_service_api_key"):
        return []  # set to what only the host's run renders (a template): not judged here
    key = host.value("sglang_service_api_key")
    bind = host.value("sglang_service_host")
    bind = "" if bind is None else str(bind).strip()
    if (key not in (None, "") and str(key).strip()) or _LOOPBACK.match(bind):
        return []
    where = "every interface" if bind in PUBLIC_HOSTS else "an address other hosts reach"
    return [("sglang_service_api_key", "sglang_service_host is %s (%s%s) and sglang_service_api_key is empty: anyone "
             "who reaches port %s could use the server. Fix: set sglang_service_api_key, best from a vault "
             "(ansible-vault encrypt_string), which the smoke test and the router then send; or set "
             "sglang_service_host: 127.0.0.1 to serve this host alone (no router then reaches it)." % (
                 bind or "empty", where, ", the default" if not host.is_set("sglang_service_host") else "",
                 host.value("sglang_service_port") or 30000))]


# The checks in the order their problems are shown. One more check: one more line.
def attention_problems(host, known):
    """GLM-5's attention as the release resolves it on SM120 runs there (plugin_utils/attention.py): the profile with
    the host's overrides, tuning options and extra arguments, as the service would render them."""
    profile = host.profile()
    release = _release(host, known)
    capability = str(host.value("preflight_compute_capability") or "12.0")
    if profile is None or release is None or not capability.startswith("12."):
        return []  # the check answers for SM120, the collection's target; other GPUs resolve otherwise
    overrides = {name: host.value("sglang_service_" + name) for name, _flag in launch_profile.SETTINGS}
    try:
        tuning = experiment_data.tuning_settings(host.value("sglang_service_tuning") or [], data=known["experiments"],
                                                 release=release, loads=profile.get("loads") or {}, searched=True)
        flags = launch_profile.launch_flags(profile, overrides, extra_args=host.value("sglang_service_extra_args"),
                                            gate_flags=tuning["flags"], version=release,
                                            renames=known["releases"].get("flag_renames"))
        found = attention.problems(flags, known["releases"], release, profile.get("architecture"),
                                   "the profile %s" % host.profile_name())
    except (experiment_data.ExperimentDataError, launch_profile.LaunchError, attention.AttentionError):
        return []  # named by tuning_problems, or by the service's own refusal where the data cannot answer
    return [("sglang_service_profiles", problem) for problem in found]


SOURCES = (
    unknown_names,
    argument_types,
    profile_problems,
    release_problems,
    tp_size_problems,
    tuning_problems,
    patch_problems,
    threshold_problems,
    load_problems,
    model_problems,
    open_server_problems,
    attention_problems,
)


def problems(hosts, known, sources=SOURCES):
    """Every problem of the run, one line each, the hosts it concerns in front, in the order of ``sources``."""
    by_message = {}
    for host_name in sorted(hosts or {}):
        host = Host(host_name, hosts[host_name], known)
        seen = set()
        for source in sources:
            for variable, message in source(host, known):
                if variable in seen and source is not unknown_names:
                    continue
                seen.add(variable)
                by_message.setdefault(message, []).append(host_name)
    return ["%s: %s" % (", ".join(names), message) for message, names in by_message.items()]


def knowledge(specs, defaults=None, published=None, profiles=None, releases=None, experiments=None, groups=None,
              serving=False):
    """What the checks know of the collection: ``specs`` role -> parsed meta/argument_specs.yml, ``defaults`` role ->
    its defaults/main.yml, ``published`` the facts the roles and playbooks set, the built-in launch profiles, the
    release and tuning data, the inventory's groups; ``serving``: the run starts servers (deploy.yml)."""
    options, names = {}, set(published or [])
    for role, parsed in (specs or {}).items():
        for entry in ((parsed or {}).get("argument_specs") or {}).values():
            for name, option in ((entry or {}).get("options") or {}).items():
                options.setdefault(name, dict(option or {}, role=role))
                names.add(name)
    flat_defaults = {}
    for role_defaults in (defaults or {}).values():
        flat_defaults.update(role_defaults or {})
    names.update(flat_defaults)
    # The experiments' old names still work for a release (the experiments role warns of each).
    names.update(experiment_settings.DEPRECATED_NAMES.values())
    return {"roles": sorted(specs or {}), "options": options, "names": names, "defaults": flat_defaults,
            "profiles": profiles or {}, "releases": releases, "experiments": experiments, "groups": groups or {},
            "serving": bool(serving)}
