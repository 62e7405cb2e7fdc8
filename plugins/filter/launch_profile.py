# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Documented in the .yml files of the same names beside this file.

from ansible.errors import AnsibleFilterError

from ansible_collections.sm120.sglang.plugins.plugin_utils import attention, launch_profile, model_config, nodes, sglang_releases
from ansible_collections.sm120.sglang.plugins.plugin_utils.filter_errors import by_name, refusing


def _flags(profile, overrides=None, host="0.0.0.0", port=launch_profile.SERVICE_PORT, model_path=None, multinode=None, extra_args=None,
           gate_flags=None, config_path=None, version=None):
    try:
        renames = sglang_releases.load().get("flag_renames") or {}
        return launch_profile.launch_flags(profile, overrides, host, port, model_path, multinode, extra_args,
                                           gate_flags, config_path, renames, version)
    except (launch_profile.LaunchError, sglang_releases.ReleaseDataError) as exc:
        raise AnsibleFilterError(str(exc))


def _environment(profile_env, env=None, gate_env=None):
    return launch_profile.launch_environment(profile_env, env, gate_env)


def _record(installed, live_gates, tuning=None):
    return launch_profile.record(installed, live_gates, tuning)


@refusing(nodes.NodesError)
def _nodes(groups, group, host, hostvars=None, dist_init_addr="", dist_init_port=25000, socket_ifname=""):
    return nodes.node_plan(groups, group, host, hostvars, dist_init_addr, dist_init_port, socket_ifname)


@refusing(model_config.ModelConfigError)
def _vocab_size(config, where="config.json"):
    return model_config.vocab_size(config, where)


@refusing(launch_profile.LaunchError)
def _recorded_tuning(environment):
    return launch_profile.recorded_tuning(environment)


@refusing(attention.AttentionError, sglang_releases.ReleaseDataError)
def _attention_problems(flags, architecture, version=None):
    data = sglang_releases.load()
    return attention.problems(flags, data, sglang_releases.resolve_version(data, version or "newest"), architecture)


def _mtp_problem(config, index, checkpoint):
    return model_config.mtp_layer_problem(config, index, checkpoint)


class FilterModule:
    def filters(self):
        return {
            "sglang_service_flags": by_name(_flags, "sglang_service_flags"),
            "sglang_service_argv": launch_profile.argv_words,
            "sglang_service_environment": _environment,
            "sglang_service_config": launch_profile.config_file,
            "sglang_service_record": _record,
            "sglang_service_recorded_tuning": _recorded_tuning,
            "sglang_service_settings": launch_profile.settings,
            "sglang_service_nodes": by_name(_nodes, "sglang_service_nodes"),
            "sglang_service_nodes_batch_problem": nodes.batch_problem,
            "sglang_service_serves_api": nodes.serves_api,
            "sglang_service_vocab_size": _vocab_size,
            "sglang_service_mtp_problem": _mtp_problem,
            "sglang_service_attention_problems": by_name(_attention_problems, "sglang_service_attention_problems"),
        }
