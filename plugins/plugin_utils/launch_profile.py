# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the sglang_service role renders: the server's flags, its environment and the record of what it runs.

Pure: the launch profile, the user's overrides, the live gates' options and the
installed release in; ordered flags, environment and record out. The templates
only write these down.
"""

from __future__ import annotations

import json

try:
    from packaging.version import InvalidVersion, Version
except ImportError:  # ansible-core requires packaging
    Version = None

# The launch settings a profile may carry, each a flag of sglang.launch_server.
SETTINGS = (
    ("served_model_name", "--served-model-name"),
    ("tp_size", "--tp-size"),
    ("mem_fraction_static", "--mem-fraction-static"),
    ("context_length", "--context-length"),
    ("kv_cache_dtype", "--kv-cache-dtype"),
)


class LaunchError(Exception):
    """The profile or the overrides cannot be rendered; the message names the flag and the fix."""


def settings(profile, overrides):
    """Each launch setting: the override when it is not None, else the profile's (None: left to SGLang)."""
    chosen = {}
    for name, _flag in SETTINGS:
        value = (overrides or {}).get(name)
        chosen[name] = value if value is not None else (profile or {}).get(name)
    return chosen


def _renamed(flags, renames, version):
    """Flags a release renamed or replaced, written the way that release takes them."""
    if not renames or not version:
        return flags
    try:
        installed = Version(str(version))
    except InvalidVersion:
        return flags
    result = {}
    for flag, value in flags.items():
        rename = (renames or {}).get(flag)
        if rename and value not in (None, False) and installed >= Version(str(rename["since"])):
            for new_flag, new_value in rename["becomes"].items():
                result[new_flag] = value if new_value == "=" else new_value
        else:
            result[flag] = value
    return result


# SGLang's own default port, and so sglang_service_port's (roles/sglang_service/defaults/main.yml, held to this
# by tests/unit/plugins/plugin_utils/test_launch_profile.py): the port a host that sets none serves on.
SERVICE_PORT = 30000


def launch_flags(profile, overrides=None, host="0.0.0.0", port=SERVICE_PORT, model_path=None, multinode=None,
                 extra_args=None, gate_flags=None, config_path=None, renames=None, version=None):
    """The server's flags in order: flag -> value (True a switch, a list several values).

    Later sources win: the profile's settings and arguments, the multi-node flags,
    the live option gates' flags, then ``extra_args``; a value of None or False
    removes a flag. Flags the installed release renamed are written its way
    (``renames``: flag -> {since, becomes: {flag: value or "="}}). ``--config``
    (the file that carries the API key) goes last.
    """
    chosen = settings(profile, overrides)
    flags = {"--model-path": model_path}
    flags.update({flag: chosen[name] for name, flag in SETTINGS[:1]})
    flags.update({"--host": host, "--port": port})
    flags.update({flag: chosen[name] for name, flag in SETTINGS[1:]})
    for layer in ((profile or {}).get("arguments"), multinode, gate_flags, extra_args):
        for flag, value in (layer or {}).items():
            if not str(flag).startswith("--"):
                raise LaunchError("%r is not a flag of sglang.launch_server: flags start with --" % (flag,))
            flags[flag] = value
    if "--api-key" in flags and flags["--api-key"] not in (None, False):
        raise LaunchError("--api-key would show the key on the server's command line to every local user; set "
                          "sglang_service_api_key instead, which reaches the server in its root-only --config file")
    flags = _renamed(flags, renames, version)
    if config_path:
        flags["--config"] = config_path
    return {flag: value for flag, value in flags.items() if value is not None and value is not False}


def argv_words(flags):
    """The flags as command-line words, as the server's parser reads them (and the unit's ExecStart= runs them):
    a flag set to None or false is left out, one set to true goes alone."""
    words = []
    for flag, value in flags.items():
        if value is None or value is False:
            continue
        words.append(flag)
        if value is True:
            continue
        if isinstance(value, (list, tuple)):
            words.extend(str(item) for item in value)
        elif isinstance(value, dict):
            words.append(json.dumps(value, sort_keys=True))
        else:
            words.append(str(value))
    return words


def launch_environment(profile_env=None, env=None, gate_env=None):
    """The server's environment: the profile's, then the user's, then the live option gates'; None removes."""
    merged = {}
    for layer in (profile_env, env, gate_env):
        merged.update(layer or {})
    return {name: str(value) for name, value in sorted(merged.items()) if value is not None}


def config_file(api_key):
    """The --config file's content: server arguments as YAML (JSON is YAML), the API key among them.

    SGLang's ConfigArgumentMerger (0.5.8 to 0.5.23) turns each key into ``--<key>``,
    so the key is the flag's name with its dashes.
    """
    arguments = {"api-key": api_key} if api_key else {}
    return json.dumps(arguments, indent=2, sort_keys=True) + "\n"


def record(installed, live_gates, tuning=None):
    """What the server runs, recorded in its environment file so that a change restarts it.

    The tuning options are recorded only when there are some, so a host without any keeps its file as it was.
    """
    packages = ",".join("%s==%s" % (name, version) for name, version in sorted((installed or {}).items()) if version)
    recorded = {"SM120_SGLANG_INSTALL_SET": packages, "SM120_PATCHES_LIVE": ",".join(sorted(live_gates or []))}
    if tuning:
        recorded["SM120_TUNING_LIVE"] = ",".join(sorted(tuning))
    return recorded


def recorded_tuning(environment):
    """The tuning options the server was started on, as record() wrote them into its environment file (read back by
    sglang_facts as name -> value; {} where there is none yet): [] where it records none."""
    if not isinstance(environment, dict):
        raise LaunchError("the service's environment file must read as a mapping of names to values, got %r"
                          % (environment,))
    return sorted(name for name in str(environment.get("SM120_TUNING_LIVE") or "").split(",") if name)
