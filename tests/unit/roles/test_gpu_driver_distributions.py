# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_driver role's per-distribution variables and templates, for distributions molecule cannot run here.

Ubuntu's and RHEL's archives are not reachable from the test machines, so no
container of theirs can converge. These tests do what the role does on such a
host, without Ansible's executor: pick the vars file the way the role's
first_found does, resolve the role's variables lazily in Ansible's precedence
(defaults < inventory < role vars), and render the role's templates with
jinja2 and Ansible's own filters. Then they check the repository lines, the
package names and the branch hold against NVIDIA's Driver Installation Guide.
"""

from __future__ import annotations

import pathlib
import re

import jinja2
import pytest

from ansible_collections.sm120.sglang.plugins.module_utils.gpu_facts import parse_query_gpu_csv
from ansible_collections.sm120.sglang.tests.unit.role_vars import RoleVars as SharedRoleVars
from ansible_collections.sm120.sglang.tests.unit.role_vars import ansible_environment, load_yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLE = ROOT / "roles" / "gpu_driver"
GPU_FIXTURES = ROOT / "tests" / "unit" / "plugins" / "module_utils" / "fixtures" / "gpu"
NVIDIA = "https://developer.download.nvidia.com/compute/cuda/repos/"


def _facts(distribution, version, os_family, kernel, architecture="x86_64"):
    return {
        "distribution": distribution,
        "distribution_version": version,
        "distribution_major_version": version.split(".")[0],
        "os_family": os_family,
        "kernel": kernel,
        "architecture": architecture,
        "virtualization_type": "kvm",
        "virtualization_role": "host",
    }


HOSTS = {
    "ubuntu2204": _facts("Ubuntu", "22.04", "Debian", "5.15.0-127-generic"),
    "ubuntu2404": _facts("Ubuntu", "24.04", "Debian", "6.8.0-49-generic"),
    "ubuntu2404-arm": _facts("Ubuntu", "24.04", "Debian", "6.8.0-49-generic-64k", "aarch64"),
    "debian12": _facts("Debian", "12.8", "Debian", "6.1.0-28-amd64"),
    "debian13": _facts("Debian", "13.1", "Debian", "6.12.48+deb13-amd64"),
    "rhel9": _facts("RedHat", "9.4", "RedHat", "5.14.0-427.13.1.el9_4.x86_64"),
    "rocky9": _facts("Rocky", "9.5", "RedHat", "5.14.0-503.14.1.el9_5.x86_64"),
}


_load = load_yaml


class RoleVars(SharedRoleVars):
    """The gpu_driver role's variables for one host."""

    def __init__(self, facts, inventory=None, facts_from_modules=None):
        super().__init__(ROLE, facts, "__gpu_driver_vars_files", inventory=inventory, extra=facts_from_modules)

    def template(self, name):
        """templates/<name> rendered as the template module does (trim_blocks, trailing newline kept)."""
        env = ansible_environment(jinja2.Environment, trim_blocks=True, keep_trailing_newline=True,
                                  loader=jinja2.FileSystemLoader(str(ROLE / "templates")))
        template = env.get_template(name)
        return "".join(template.root_render_func(template.new_context(self, shared=True)))


def records(text):
    """The lines of a rendered file that are not comments."""
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def rtx_pro_6000_x8():
    return parse_query_gpu_csv((GPU_FIXTURES / "rtx-pro-6000-server-x8" / "query-gpu.csv").read_text())


# ---- which vars file, which repository -------------------------------------------------------------------------

@pytest.mark.parametrize("host, vars_file, repo", [
    ("ubuntu2204", "Ubuntu.yml", "ubuntu2204/x86_64/"),
    ("ubuntu2404", "Ubuntu.yml", "ubuntu2404/x86_64/"),
    ("ubuntu2404-arm", "Ubuntu.yml", "ubuntu2404/sbsa/"),
    ("debian12", "Debian.yml", "debian12/x86_64/"),
    ("debian13", "Debian.yml", "debian13/x86_64/"),
    ("rhel9", "RedHat.yml", "rhel9/x86_64/"),
    ("rocky9", "RedHat.yml", "rhel9/x86_64/"),
])
def test_each_distribution_gets_nvidias_repository_for_its_release(host, vars_file, repo):
    role = RoleVars(HOSTS[host])
    assert role.vars_file.name == vars_file
    assert role["__gpu_driver_repo_url"] == NVIDIA + repo
    key = "D42D0685.pub" if vars_file == "RedHat.yml" else "3bf863cc.pub"
    assert role["__gpu_driver_repo_key_url"] == NVIDIA + repo + key


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_every_known_release_is_supported(host):
    role = RoleVars(HOSTS[host])
    facts = HOSTS[host]
    supported = role["__gpu_driver_supported"].get(facts["distribution"], [])
    assert facts["distribution_version"] in supported or facts["distribution_major_version"] in supported


@pytest.mark.parametrize("facts", [
    _facts("Ubuntu", "20.04", "Debian", "5.4.0-200-generic"),
    _facts("Debian", "11.11", "Debian", "5.10.0-33-amd64"),
    _facts("RedHat", "8.10", "RedHat", "4.18.0-553.el8_10.x86_64"),
])
def test_releases_without_a_vars_entry_are_not_supported(facts):
    supported = RoleVars(facts)["__gpu_driver_supported"].get(facts["distribution"], [])
    assert facts["distribution_version"] not in supported and facts["distribution_major_version"] not in supported


def test_a_mirror_replaces_nvidias_url_and_serves_the_key_too():
    role = RoleVars(HOSTS["ubuntu2404"], {"gpu_driver_repo_url": "https://mirror.example.internal/nvidia/ubuntu2404/x86_64"})
    assert role["__gpu_driver_repo_url"] == "https://mirror.example.internal/nvidia/ubuntu2404/x86_64/"
    assert role["__gpu_driver_repo_key_url"] == "https://mirror.example.internal/nvidia/ubuntu2404/x86_64/3bf863cc.pub"
    assert "URIs: https://mirror.example.internal/nvidia/ubuntu2404/x86_64/" in records(role.template("nvidia-cuda.sources.j2"))


def test_a_key_url_of_its_own_wins():
    role = RoleVars(HOSTS["rhel9"], {"gpu_driver_repo_key_url": "https://keys.example.internal/nvidia.pub"})
    assert role["__gpu_driver_repo_key_url"] == "https://keys.example.internal/nvidia.pub"


# ---- packages ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("host", ["ubuntu2204", "ubuntu2404"])
def test_ubuntu_installs_the_compute_only_open_driver_of_the_branch(host):
    role = RoleVars(HOSTS[host])
    assert role["__gpu_driver_package_manager"] == "apt"
    assert role["__gpu_driver_packages"] == [
        "nvidia-driver-pinning-580",
        "libnvidia-compute-580",
        "nvidia-dkms-580-open",
        "nvidia-utils-580",
        "nvidia-compute-utils-580",
    ]
    assert role["__gpu_driver_kernel_packages"] == ["linux-headers-" + HOSTS[host]["kernel"], "dkms"]


def test_ubuntu_from_branch_590_uses_the_names_without_branch():
    role = RoleVars(HOSTS["ubuntu2404"], {"gpu_driver_branch": 590})
    assert role["__gpu_driver_packages"] == [
        "nvidia-driver-pinning-590",
        "libnvidia-compute",
        "nvidia-dkms-open",
        "nvidia-utils",
        "nvidia-compute-utils",
    ]
    assert "Pin: version 590.*" in records(role.template("nvidia-driver-branch.pref.j2"))


@pytest.mark.parametrize("host", ["debian12", "debian13"])
def test_debian_installs_the_compute_only_open_driver(host):
    role = RoleVars(HOSTS[host])
    assert role["__gpu_driver_packages"] == [
        "nvidia-driver-pinning-580", "nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-persistenced"]


@pytest.mark.parametrize("host", ["rhel9", "rocky9"])
def test_rhel_installs_the_open_dkms_module_and_the_running_kernels_devel(host):
    role = RoleVars(HOSTS[host])
    assert role["__gpu_driver_package_manager"] == "dnf"
    assert role["__gpu_driver_packages"] == ["nvidia-driver-cuda", "kmod-nvidia-open-dkms", "nvidia-persistenced"]
    assert role["__gpu_driver_kernel_packages"] == ["kernel-devel-" + HOSTS[host]["kernel"], "kernel-headers", "dkms"]
    assert role["__gpu_driver_initramfs_command"] == ["dracut", "--force"]
    assert role["__gpu_driver_bootloader"] == "grubby"


def test_a_package_list_of_its_own_wins():
    role = RoleVars(HOSTS["ubuntu2404"], {"gpu_driver_packages": ["nvidia-open-580"]})
    assert role["__gpu_driver_packages"] == ["nvidia-open-580"]


# ---- repository files and branch hold ------------------------------------------------------------------------------

@pytest.mark.parametrize("host, distro", [("ubuntu2204", "ubuntu2204"), ("ubuntu2404", "ubuntu2404")])
def test_apt_source_is_the_flat_repository_signed_by_the_roles_key(host, distro):
    role = RoleVars(HOSTS[host])
    assert role["__gpu_driver_files"]["repo_path"] == "/etc/apt/sources.list.d/nvidia-cuda.sources"
    assert records(role.template("nvidia-cuda.sources.j2")) == [
        "Types: deb",
        "URIs: %s%s/x86_64/" % (NVIDIA, distro),
        "Suites: /",
        "Signed-By: /etc/apt/keyrings/nvidia-cuda.asc",
    ]


@pytest.mark.parametrize("host", ["ubuntu2204", "ubuntu2404", "debian12"])
def test_apt_holds_every_nvidia_source_package_on_the_branch(host):
    role = RoleVars(HOSTS[host])
    assert role["__gpu_driver_files"]["hold_path"] == "/etc/apt/preferences.d/nvidia-driver-branch.pref"
    assert records(role.template("nvidia-driver-branch.pref.j2")) == [
        "Package: src:*nvidia*:any src:cuda-drivers:any src:cuda-compat:any",
        "Pin: version 580.*",
        "Pin-Priority: 1000",
    ]


def test_rhel_repository_matches_nvidias_repo_file():
    role = RoleVars(HOSTS["rhel9"])
    assert role["__gpu_driver_files"]["repo_path"] == "/etc/yum.repos.d/nvidia-cuda.repo"
    assert records(role.template("nvidia-cuda.repo.j2")) == [
        "[cuda-rhel9-x86_64]",
        "name=NVIDIA CUDA rhel9 x86_64",
        "baseurl=%srhel9/x86_64/" % NVIDIA,
        "enabled=1",
        "gpgcheck=1",
        "gpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-nvidia-cuda",
    ]


def test_rhel_holds_the_branch_with_the_open_module_stream():
    role = RoleVars(HOSTS["rocky9"], {"gpu_driver_branch": 575})
    assert role["__gpu_driver_files"]["hold_path"] == "/etc/dnf/modules.d/nvidia-driver.module"
    # Exactly what `dnf module enable nvidia-driver:575-open` writes, so that dnf rewriting it changes nothing.
    assert role.template("nvidia-driver.module.j2") == (
        "[nvidia-driver]\nname=nvidia-driver\nstream=575-open\nprofiles=\nstate=enabled\n")


# ---- boot configuration and units ----------------------------------------------------------------------------------

def test_nouveau_blacklist():
    assert records(RoleVars(HOSTS["ubuntu2204"]).template("blacklist-nouveau.conf.j2")) == [
        "blacklist nouveau", "options nouveau modeset=0"]


def test_grub_drop_in_adds_to_the_command_line():
    role = RoleVars(HOSTS["ubuntu2404"], {"gpu_driver_kernel_parameters": ["iommu=pt", "pcie_aspm=off"]})
    # The role's own (gpu_driver_iommu_mode pt, PCIe power management off) join the inventory's, each once.
    assert records(role.template("grub-kernel-parameters.cfg.j2")) == [
        'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX} iommu=pt pcie_aspm=off pcie_port_pm=off"']
    assert role["__gpu_driver_bootloader_command"] == ["update-grub"]
    plain = RoleVars(HOSTS["ubuntu2404"], {"gpu_driver_iommu_mode": "", "gpu_driver_pcie_power_management_off": False})
    assert plain["__gpu_driver_kernel_parameters"] == []


def test_the_nvidia_uvm_option_turns_hmm_off():
    role = RoleVars(HOSTS["ubuntu2404"], {})
    assert records(role.template("nvidia-uvm-disable-hmm.conf.j2")) == ["options nvidia_uvm uvm_disable_hmm=1"]
    assert role["__gpu_driver_restorable_files"] == ["/etc/modprobe.d/nvidia-uvm-disable-hmm.conf",
                                                     "/etc/default/grub.d/90-sm120-gpu-driver.cfg"]


GRUBBY_INFO = """index=0
kernel="/boot/vmlinuz-5.14.0-427.13.1.el9_4.x86_64"
args="ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rl-swap rd.lvm.lv=rl/root rhgb quiet iommu=pt"
root="/dev/mapper/rl-root"
initrd="/boot/initramfs-5.14.0-427.13.1.el9_4.x86_64.img"
title="Rocky Linux (5.14.0-427.13.1.el9_4.x86_64) 9.4 (Blue Onyx)"
"""


@pytest.mark.parametrize("wanted, missing", [
    (["iommu=pt"], ["pcie_aspm=off", "pcie_port_pm=off"]),
    (["iommu=pt", "intel_iommu=on"], ["intel_iommu=on", "pcie_aspm=off", "pcie_port_pm=off"]),
])
def test_grubby_adds_only_the_parameters_the_default_entry_lacks(wanted, missing):
    task = next(task for task in _load(ROLE / "tasks" / "kernel-parameters-grubby.yml") if "vars" in task)
    role = RoleVars(HOSTS["rhel9"], {"gpu_driver_kernel_parameters": wanted}, {
        "__gpu_driver_grubby_info": {"stdout_lines": GRUBBY_INFO.splitlines()},
        **task["vars"],
    })
    assert role["__gpu_driver_missing_kernel_parameters"] == missing


def test_power_limit_unit_sets_each_gpus_maximum_by_uuid():
    gpus = rtx_pro_6000_x8()
    unit = RoleVars(HOSTS["ubuntu2404"], facts_from_modules={"nvidia_gpus": gpus}).template("nvidia-power-limit.service.j2")
    exec_start = [line for line in records(unit) if line.startswith("ExecStart=")]
    assert exec_start == ["ExecStart=/usr/bin/nvidia-smi -i %s -pl 600" % gpu["uuid"] for gpu in gpus]
    assert "Type=oneshot" in records(unit) and "RemainAfterExit=yes" in records(unit)
    assert "After=nvidia-persistenced.service" in records(unit)
    assert "WantedBy=multi-user.target" in records(unit)


def test_power_limit_unit_with_configured_watts_and_a_fractional_maximum():
    gpus = rtx_pro_6000_x8()
    role = RoleVars(HOSTS["rhel9"], {"gpu_driver_power_limit_w": 450}, {"nvidia_gpus": gpus})
    assert all(line.endswith(" -pl 450") for line in records(role.template("nvidia-power-limit.service.j2"))
               if line.startswith("ExecStart="))
    gpus[3]["power_max_limit_w"] = 575.5
    role = RoleVars(HOSTS["rhel9"], facts_from_modules={"nvidia_gpus": gpus})
    assert "ExecStart=/usr/bin/nvidia-smi -i %s -pl 575.5" % gpus[3]["uuid"] in records(
        role.template("nvidia-power-limit.service.j2"))


def test_persistenced_unit_keeps_persistence_on_and_skips_without_the_program():
    unit = records(RoleVars(HOSTS["ubuntu2204"]).template("nvidia-persistenced.service.j2"))
    assert "ExecStart=/usr/bin/nvidia-persistenced --verbose" in unit
    assert "ConditionPathExists=/usr/bin/nvidia-persistenced" in unit
    assert not any("no-persistence-mode" in line for line in unit)


# ---- verify's view of gpu_facts ----------------------------------------------------------------------------------

def test_verify_finds_the_gpus_of_another_architecture():
    h200 = parse_query_gpu_csv((GPU_FIXTURES / "h200-device-run" / "query-gpu.csv").read_text())
    role = RoleVars(HOSTS["debian12"], facts_from_modules={"nvidia_gpus": h200 + rtx_pro_6000_x8()[:1],
                                                           "nvidia_driver_version": "575.57.08"})
    assert role["__gpu_driver_architecture_problem"] == (
        "Expected compute capability 12.0 (gpu_driver_expected_compute_capability) on every GPU, found GPU 0 NVIDIA "
        "H200 with 9.0. Fix: this collection deploys for SM120 (RTX PRO 6000 Blackwell); take the host out of "
        "gpu_hosts, or set gpu_driver_expected_compute_capability if it is meant to run these GPUs.")
    assert role["__gpu_driver_loaded_branch"] == "575"
    assert role["__gpu_driver_persistence_off"] == []


def test_container_mode_follows_the_virtualization_facts():
    assert RoleVars(HOSTS["debian12"])["__gpu_driver_container"] is False
    docker = dict(HOSTS["debian12"], virtualization_type="docker", virtualization_role="guest")
    assert RoleVars(docker)["__gpu_driver_container"] is True
    assert RoleVars(docker, {"gpu_driver_container_mode": False})["__gpu_driver_container"] is False


# ---- inputs ----------------------------------------------------------------------------------------------------------

def test_every_variable_the_role_reads_is_an_input_or_internal():
    text = "\n".join(path.read_text() for path in sorted(ROLE.rglob("*")) if path.is_file())
    used = set(re.findall(r"\b(gpu_driver_[a-z0-9_]+)", text))
    defaults = set(_load(ROLE / "defaults" / "main.yml"))
    assert used - defaults == set()
